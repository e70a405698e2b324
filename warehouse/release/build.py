"""Whole builds: `build_release` (stage then commit), a correction of a published release, and
the default window of a build."""

from __future__ import annotations

import datetime as dt
from typing import Any

from lookbench_live.schema.committed import (
    committed_versions,
    previous_published,
    read_manifest,
    resolve_version,
)
from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.release import next_revision, parse_version
from lookbench_live.warehouse.assemble import Window
from lookbench_live.warehouse.freshness import DEFAULT_CADENCE_DAYS, default_window
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release.commit import BuildResult, commit_release, withdraw_release
from lookbench_live.warehouse.release.stage import stage_release


def default_release_window(
    lake: Lake, version: str, *, as_of: dt.datetime | None = None, cadence_days: int = DEFAULT_CADENCE_DAYS
) -> Window:
    """The window of a build without `--window`: the refresh's own rule (`freshness.default_window`)
    for the version's day (or `as_of`): from where the newest published release before it
    stopped, or `cadence_days` back when there is none, to the end of that day. Never the whole
    history: a build that re-released everything would mostly be held back as already published."""
    day = as_of or dt.datetime.combine(parse_version(version)[0], dt.time(), tzinfo=dt.UTC)
    found = previous_published(lake, version)
    return default_window(day, cadence_days, previous_end=found[1] if found else None)


def correct_release(lake: Lake, version: str, reason: str, **stage_args: Any) -> BuildResult:
    """A correction of the published `version`: the next `vYYYYMMDD.N`, rebuilt from the lake's
    current content over `version`'s own window (takedowns and fixed labels apply), naming
    `version` in `supersedes`; then `version` is withdrawn with `reason`, so readers, ranges and
    exports see the correction only. Run under the writer lock."""
    version = resolve_version(lake, version)
    manifest = read_manifest(lake, version)
    window = manifest.get("window") or {}

    def moment(value: Any) -> dt.datetime | None:
        return parse_moment(value) if isinstance(value, str) else None

    new = next_revision(version, committed_versions(lake))
    result = build_release(
        lake,
        version=new,
        window=Window(moment(window.get("start")), moment(window.get("end"))),
        supersedes=version,
        **stage_args,
    )
    withdraw_release(lake, version, f"superseded by {new}: {reason}")
    return result


def build_release(
    lake: Lake,
    *,
    extra_manifest: dict[str, Any] | None = None,
    publish_latest: bool = True,
    latest_reason: str = "",
    **stage_args: Any,
) -> BuildResult:
    """`stage_release` then `commit_release`, for callers with nothing to add in between."""
    staged = stage_release(lake, **stage_args)
    return commit_release(
        lake, staged, extra_manifest, publish_latest=publish_latest, latest_reason=latest_reason
    )
