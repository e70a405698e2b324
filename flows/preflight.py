"""What `refresh` and `backfill` check before Prefect is imported or any work begins.

Each check raises `OptionError` (or `ReachError`) with one line naming the option or setting
and how to fix it; `cli.main` prints it as `error: …`. Nothing here imports Prefect: a bad
option costs milliseconds, not the 25 s of starting Prefect's API.

    checked = check_refresh(settings, home, as_of="2026-12-01", since=None, replace=False)
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from lookbench_live.config import Settings, SiteSettings
from lookbench_live.flows.runtime import default_as_of
from lookbench_live.schema.moments import parse_moment


class OptionError(ValueError):
    """A command-line option has a value the command cannot run with; the message names it."""


class ReachError(ValueError):
    """The configured sites cannot yield a subset every release needs; the message says how to fix it."""


@dataclass(frozen=True, slots=True)
class CheckedRefresh:
    as_of: dt.datetime
    since: dt.datetime | None


def parse_date_option(option: str, value: str | None) -> dt.datetime | None:
    """`value` as a UTC moment (ISO date or datetime), or `OptionError` naming `option`."""
    try:
        return parse_moment(value)
    except ValueError as exc:
        raise OptionError(
            f"{option} {value!r} is not a date: use YYYY-MM-DD or an ISO datetime ({exc})"
        ) from None


def is_look_source(site: SiteSettings) -> bool:
    """A site that visits look pages: the `looks` spider, or any spider given `look_paths`."""
    return site.looks and (site.platform == "looks" or bool(site.look_paths))


def check_reach(settings: Settings) -> None:
    """Refuse configured sites none of which can yield RealStreetLook (no look pages): the run
    would crawl everything and then fail the release's content check on the empty subset. The
    embedded default (no sites) is the sample store, which has look pages."""
    sites = settings.crawl.sites
    if not sites or any(is_look_source(site) for site in sites):
        return
    names = ", ".join(site.name for site in sites)
    raise ReachError(
        f"crawl.sites ({names}): no site has look pages, so real_streetlook would be empty and the "
        'release refused; add a site with platform = "looks" or with look_paths (and looks = true)'
    )


def latest_version(home: str | None, settings: Settings) -> str | None:
    """The newest committed release of the lake, None for a lake without one (or none yet)."""
    from lookbench_live.warehouse.lake import Lake, resolve_home
    from lookbench_live.warehouse.release import committed_versions

    root = resolve_home(home or settings.lake.home)
    if "://" not in root:
        import os

        if not os.path.isdir(root):  # a new lake: nothing to be after (and nothing created here)
            return None
    versions = committed_versions(Lake(root))
    return versions[-1] if versions else None


def check_refresh(
    settings: Settings, home: str | None, *, as_of: str | None, since: str | None, replace: bool
) -> CheckedRefresh:
    """Every refresh option and the configuration's reach, before any work.

    An `--as-of` whose day is before the lake's latest release is refused: a refresh moves
    forward. `--replace` (rebuilding a release, a correction) and `backfill` are the ways back."""
    moment = parse_date_option("--as-of", as_of) or default_as_of()
    start = parse_date_option("--since", since)
    if start is not None and start >= moment + dt.timedelta(days=1):
        raise OptionError(f"--since {since} is after --as-of {moment.date()}: the window would be empty")
    check_reach(settings)
    latest = latest_version(home, settings)
    if latest is not None and not replace and f"v{moment:%Y%m%d}" < latest:
        raise OptionError(
            f"--as-of {moment.date()} is before the lake's latest release {latest}: a refresh only "
            "moves forward; rebuild a past release with --replace, or re-release a past window with "
            "`lookbench-live backfill --start … --end …`"
        )
    return CheckedRefresh(as_of=moment, since=start)


# The stages a backfill can rerun: `flows.refresh.ALL_STAGES` (not imported: it imports Prefect).
STAGES = ("crawl", "ingest", "dedup", "annotate", "generate", "audit", "release", "evaluate")


def check_backfill(start: str, end: str, stages: list[str] | None = None) -> None:
    """Both window options are dates, the window is not empty, every `--stages` is a stage."""
    begin = parse_date_option("--start", start)
    finish = parse_date_option("--end", end)
    if begin is None or finish is None or begin >= finish:
        raise OptionError(f"--start {start} --end {end}: the window is empty, --start must be before --end")
    unknown = [stage for stage in stages or () if stage not in STAGES]
    if unknown:
        raise OptionError(f"--stages {', '.join(unknown)}: not a stage; the stages are {', '.join(STAGES)}")
