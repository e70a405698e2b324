"""Run one site's crawl in a subprocess and report what it added to the lake.

    result = run_crawl(site, crawl, lake_home, run_key="2026-02", since=last_release_time)

The crawl runs as `python -m lookbench_live.scrapers.crawl …` because the Twisted reactor
cannot restart inside one process. Its state lives under `<lake>/crawl-state/<site>/<run_key>/`
(the journal, see `journal.py`): calling `run_crawl` again with the same run key after a kill
resumes it, refetches nothing it finished and writes no duplicate rows; calling it after the
crawl completed returns the recorded result without crawling.

What a run added is counted from the lake against a baseline taken when the run key was
first started, so the counts are exact however often the run was interrupted.

Budgets (`SiteSettings.max_pages`, `max_duration`): at either the crawl stops cleanly and what
it did not reach (requests over the page budget, requests pending when time ran out) becomes
the site's frontier, `<state>/<site>/frontier.json`; the next run key of the site starts with
those requests (snapshotted into its own state when it starts, so a killed run resumes with
the same input). The result says `status = "over_budget"` and how many requests it left.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads

from lookbench_live import activity, interrupt
from lookbench_live.config import CrawlSettings, SiteSettings
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes

BASELINE_NAME = "baseline.json"
RESULT_NAME = "result.json"
FRONTIER_NAME = "frontier.json"  # per site: what the last finished run did not reach
FRONTIER_IN_NAME = "frontier-in.json"  # per run: the frontier it started from
OUTCOME_NAME = "outcome.json"  # per run: how the subprocess ended (finish_reason)
SNAPSHOT_TABLES = ("products", "looks")  # the tables a run's counts compare with its baseline
BUDGET_REASONS = ("closespider_timeout", "closespider_pagecount")
# Rejection reasons that say the host could not be reached (not that it refused us): a run that
# fetched nothing for these reasons is not a finished crawl, and its next call crawls again.
UNREACHABLE_REASONS = frozenset(
    {"robots_unreachable", "connection_refused", "dns_error", "timeout", "host_parked", "download_failed"}
)


MIN_TIME_LIMIT_S = 1800.0  # a crawl's limit is never below this (start-up, sitemaps, robots)
GRACE_S = 120.0  # between the crawl's own clean stop and the hard kill


def slowest_pacing(site: SiteSettings, crawl: CrawlSettings) -> float:
    """Seconds between two requests to the site at worst: its `download_delay`, or a robots.txt
    Crawl-delay up to `crawl.max_crawl_delay` (a slower one is refused)."""
    return max(site.download_delay, crawl.max_crawl_delay if crawl.obey_robots else 0.0)


def drain_s(site: SiteSettings, crawl: CrawlSettings) -> float:
    """How long a paced crawl takes to close: Scrapy finishes the requests already handed to the
    downloader (up to CONCURRENT_REQUESTS, see settings.py), one per pacing interval."""
    return max(16, site.concurrency) * slowest_pacing(site, crawl)


def crawl_time_limit(site: SiteSettings, crawl: CrawlSettings) -> float:
    """How long one call of a site's crawl subprocess may run: `crawl.time_limit` when set, else
    what the site's budgets can take: `max_duration`, or `max_pages` at the slowest pacing, so
    `Crawl-delay: 10` with `max_pages = 300` gets 3,000 s (plus closing) instead of being killed
    every month at a fixed 1,800 s."""
    if crawl.time_limit is not None:
        return crawl.time_limit
    paced = site.max_pages * slowest_pacing(site, crawl)
    return max(MIN_TIME_LIMIT_S, site.max_duration or 0.0, paced) + GRACE_S + drain_s(site, crawl)


def clean_stop_after(limit_s: float, site: SiteSettings, crawl: CrawlSettings) -> float:
    """When the crawl stops itself (Scrapy's `closespider_timeout`, its frontier saved) ahead of
    the hard kill at `limit_s`: early enough to start up and to close (`drain_s`), never before
    half the limit. The kill then only catches a crawl that hangs."""
    return limit_s - min(GRACE_S + drain_s(site, crawl), limit_s / 2)


class CrawlError(RuntimeError):
    """A crawl subprocess failed or ran out of time; rerunning with the same run key resumes it."""


@dataclass(slots=True)
class CrawlResult:
    """What one run of one site added to the lake (whole run, across resumes)."""

    site: str
    run_key: str
    products_new: int = 0
    products_changed: int = 0
    looks_new: int = 0
    rejections_by_reason: dict[str, int] = field(default_factory=dict)
    pages: int = 0
    resumed: bool = False
    # ok | over_budget (a budget stopped it; `unreached` requests wait) | unreachable (nothing
    # fetched, the host could not be reached: not recorded as done, see `is_unreachable`)
    status: str = "ok"
    unreached: int = 0
    finish_reason: str = "finished"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def state_dir(lake: Lake, site: str, run_key: str, base: str | None = None) -> Path:
    """Where a crawl keeps its journal: `<lake>/crawl-state/…` for a local lake, else under
    `base` (`crawl.state_dir`, a local folder private to the pipeline user), because the
    journal is appended line by line, which object stores cannot do."""
    safe_key = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_key)
    if base is not None:
        lake_id = hashlib.sha256(lake.home.encode()).hexdigest()[:12]
        return Path(base).expanduser() / lake_id / site / safe_key
    if not lake.local:
        raise CrawlError(
            f"the lake {lake.home} is an object store: set crawl.state_dir to a local folder for the crawl journals"
        )
    return Path(lake.path("crawl-state", site, safe_key))


def ensure_private_dir(directory: Path) -> None:
    """Create `directory` private to this user, or refuse one another user could have planted (O8).

    Scrapy's JOBDIR holds pickles, and loading a pickle runs code: the folder must be ours and
    writable by no one else, and no folder above it may let others swap it (writable by group
    or others without the sticky bit, as /tmp has)."""
    import stat

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = directory.stat()
    if info.st_uid != os.geteuid():
        raise CrawlError(f"the crawl state folder {directory} belongs to uid {info.st_uid}, not to this user")
    os.chmod(directory, 0o700)
    for parent in directory.resolve().parents:
        mode = parent.stat()
        shared = mode.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode.st_mode & stat.S_ISVTX
        if shared:
            raise CrawlError(
                f"the crawl state folder {directory} lies under {parent}, which other users may write to; "
                "set crawl.state_dir to a folder private to the pipeline user"
            )


def run_crawl(
    site: SiteSettings,
    crawl: CrawlSettings,
    lake_home: str,
    run_key: str,
    *,
    since: dt.datetime | None = None,
    jobdir: str | None = None,
    timeout_s: float | None = None,
    seen_at: dt.datetime | None = None,
) -> CrawlResult:
    """Crawl one site into `Lake(lake_home)` and return what this run added.

    `since`: products whose stated dates are all older, and sitemap entries with an older
    `lastmod`, are not new work. `seen_at`: the run's logical time, stamped as `first_seen_at`
    of what it discovers (default: the moment each item is observed), so that a killed run
    rerun gives the same rows. `jobdir` overrides the state directory. `timeout_s` (default
    `crawl_time_limit`): the crawl stops itself cleanly a little before it (`clean_stop_after`);
    past it the subprocess is killed, what its journal had not reached becomes the site's
    frontier (so the next run key starts there, not from the same first pages) and
    `CrawlError` is raised; a rerun of the same run key resumes from its journal.
    """
    lake = Lake(lake_home)
    directory = Path(jobdir) if jobdir else state_dir(lake, site.name, run_key, crawl.state_dir)
    ensure_private_dir(directory)
    done = directory / RESULT_NAME
    if done.exists():
        return CrawlResult(**json.loads(done.read_text(encoding="utf-8")))
    baseline_path = directory / BASELINE_NAME
    resumed = baseline_path.exists()
    site_frontier = directory.parent / FRONTIER_NAME
    frontier_in = directory / FRONTIER_IN_NAME
    if not resumed:
        # The frontier this run starts from is fixed before anything else, so a rerun after a
        # kill starts (or resumes) from the same requests.
        carried = site_frontier.read_bytes() if site_frontier.exists() and not jobdir else b"[]"
        atomic_write_bytes(lake.fs, str(frontier_in), carried)
        atomic_write_bytes(lake.fs, str(baseline_path), json.dumps(_snapshot(lake, site.name)).encode())
    command = [
        sys.executable,
        "-m",
        "lookbench_live.scrapers.crawl",
        "--site",
        site.model_dump_json(),
        "--crawl",
        crawl.model_copy(update={"sites": []}).model_dump_json(),
        "--lake",
        lake.home,
        "--run-key",
        run_key,
        "--state-dir",
        str(directory),
    ]
    if since is not None:
        command += ["--since", since.astimezone(dt.UTC).isoformat()]
    if seen_at is not None:
        command += ["--seen-at", seen_at.astimezone(dt.UTC).isoformat()]
    if frontier_in.exists():
        command += ["--frontier", str(frontier_in)]
    if timeout_s is None:
        timeout_s = crawl_time_limit(site, crawl)
    # The subprocess stops itself before the limit (frontier saved); the hard kill catches a hang.
    command += ["--stop-after", f"{clean_stop_after(timeout_s, site, crawl):.3f}"]
    log_path = directory / "crawl.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=crawl_env(lake.home),
        )
        try:
            code = _wait(process, timeout_s, directory)
        except interrupt.Interrupted:
            # Ctrl-C or SIGTERM: the crawl stops now, as if killed; the rerun resumes this run
            # key from its journal (the path a kill -9 takes), so nothing is written after it.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            salvage_journal(lake.home, site.name, run_key, directory, crawl.batch_size, seen_at)
            if not jobdir:
                save_frontier(lake, directory, site_frontier)
            raise CrawlError(
                f"crawl of {site.name} (run {run_key}) did not finish in {timeout_s:g} s; "
                f"rerun to resume it (log: {log_path})"
            ) from None
    if code != 0:
        salvage_journal(lake.home, site.name, run_key, directory, crawl.batch_size, seen_at)
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise CrawlError(
            f"crawl of {site.name} (run {run_key}) exited with status {code}; log {log_path}:\n{tail}"
        )
    baseline = json.loads(baseline_path.read_text(encoding="utf-8"))
    result = _count(lake, site.name, run_key, baseline, directory)
    result.resumed = resumed
    outcome_path = directory / OUTCOME_NAME
    if outcome_path.exists():
        result.finish_reason = json.loads(outcome_path.read_text(encoding="utf-8")).get("finish_reason")
    from lookbench_live.scrapers.journal import CrawlJournal

    journal = CrawlJournal(directory)
    left = journal.frontier()
    journal.close()
    result.unreached = len(left)
    if is_unreachable(result):
        # Not a completion: the journal says every request failed to connect, so resuming it
        # would fetch nothing. Its state is set aside (kept for its log) and the next call
        # starts this run key afresh, from the same frontier (the site's is left as it was).
        result.status = "unreachable"
        directory.rename(directory.with_name(f"{directory.name}.unreachable-{os.urandom(4).hex()}"))
        return result
    if left or result.finish_reason in BUDGET_REASONS:
        result.status = "over_budget"
    if not jobdir:
        # Replaced, never appended: the next run starts from exactly what this one left.
        atomic_write_bytes(lake.fs, str(site_frontier), json.dumps(left).encode())
    atomic_write_bytes(lake.fs, str(done), json.dumps(result.to_json()).encode())
    return result


def _wait(process: subprocess.Popen[bytes], timeout_s: float, directory: Path) -> int:
    """The crawl subprocess's exit status; `TimeoutExpired` after `timeout_s`, and `Interrupted`
    within half a second of a stop request (`lookbench_live.interrupt`). Meanwhile the pages it
    finishes are counted for the progress line, from the journal's `done` lines."""
    from lookbench_live.scrapers.journal import JOURNAL_NAME

    journal = directory / JOURNAL_NAME
    offset = journal.stat().st_size if journal.exists() else 0  # a resumed crawl's earlier pages
    deadline = time.monotonic() + timeout_s
    while True:
        interrupt.check("crawl")
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout_s)
        try:
            return process.wait(timeout=min(0.5, left))
        except subprocess.TimeoutExpired:
            offset = _count_pages(journal, offset)


def _count_pages(journal: Path, offset: int) -> int:
    """Count the whole `done` lines written to `journal` after `offset`; returns the new offset."""
    try:
        with open(journal, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return offset
    end = data.rfind(b"\n") + 1
    activity.count("pages crawled", data[:end].count(b'{"t":"done"'))
    return offset + end


def save_frontier(lake: Lake, directory: Path, site_frontier: Path) -> int:
    """A killed crawl's frontier: the requests its journal deferred or left pending, written as
    the site's, so the next run key starts from them. The killed run key itself resumes from
    its journal and, once it finishes, replaces this with what it left. Returns the count."""
    from lookbench_live.scrapers.journal import CrawlJournal

    journal = CrawlJournal(directory)
    try:
        left = journal.frontier()
    finally:
        journal.close()
    atomic_write_bytes(lake.fs, str(site_frontier), json.dumps(left).encode())
    return len(left)


def is_unreachable(result: CrawlResult) -> bool:
    """Nothing fetched, nothing added, and the reasons recorded say the host was not reached."""
    added = result.products_new or result.products_changed or result.looks_new
    reasons = set(result.rejections_by_reason)
    return result.pages == 0 and not added and bool(reasons) and reasons <= UNREACHABLE_REASONS


def salvage_journal(
    lake_home: str, source: str, run_key: str, directory: Path, batch_size: int, seen_at: dt.datetime | None
) -> int:
    """Write what a killed or failed crawl had decided (its journal's items: rejections, products,
    looks) into the lake, as its rerun's pipeline would first thing; idempotent by key. Returns
    the number of journaled items. A kill at the hard timeout thus loses no recorded outcome."""
    from types import SimpleNamespace

    from lookbench_live.scrapers.journal import CrawlJournal
    from lookbench_live.scrapers.pipelines import LakePipeline

    journal = CrawlJournal(directory)
    try:
        pipeline = LakePipeline(lake_home, source, run_key, str(directory), batch_size,
                                seen_at.astimezone(dt.UTC).isoformat() if seen_at else None)  # fmt: skip
        pipeline.open_spider(SimpleNamespace(journal=journal))
        return len(journal.items)
    finally:
        journal.close()


# What the crawl subprocess may inherit (X3): it renders untrusted pages, so no API keys, no
# cloud credentials unless its lake is an object store (then only AWS_*, which s3fs reads).
CRAWL_ENV_KEYS = (
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "XDG_RUNTIME_DIR",
    "XDG_CACHE_HOME", "PLAYWRIGHT_BROWSERS_PATH", "HF_HUB_OFFLINE", "DO_NOT_TRACK",
)  # fmt: skip
LAKE_ENV_KEYS = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION",
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
    "AWS_CA_BUNDLE",
)  # fmt: skip


def crawl_env(lake_home: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The crawl subprocess's whole environment: the allowlist above, nothing else."""
    from lookbench_live.warehouse.lake import is_local

    source = dict(os.environ if environ is None else environ)
    keys = CRAWL_ENV_KEYS + (() if is_local(lake_home) else LAKE_ENV_KEYS)
    return {key: source[key] for key in keys if key in source}


def read_frontier(lake: Lake, site: str, base: str | None = None) -> list[dict[str, Any]]:
    """The requests the site's last finished run did not reach (what its next run starts with)."""
    path = state_dir(lake, site, "_", base).parent / FRONTIER_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


def _die_with_parent() -> None:
    """Linux: the crawl gets SIGKILL when the flow process dies (even by SIGKILL), so a killed
    run leaves no orphan crawl writing to the lake while its rerun starts."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _snapshot(lake: Lake, source: str) -> dict[str, Any]:
    """What the lake held before the run's crawl: the names of the products' and looks'
    fragments. The fragments written since hold this run's rows (a fragment is never
    rewritten), so counting reads the run's rows, not every site's history."""
    return {
        "fragments": {
            table: [os.path.basename(p) for p in lake.fragments(table)] for table in SNAPSHOT_TABLES
        }
    }


def _entries(lake: Lake, source: str) -> dict[str, list[str]]:
    """This source's product entries ("id\tcontent hash") and look ids: the older baseline's form."""
    site = pads.field("source") == source
    products = lake.read("products", columns=["product_id", "content_hash"], where=site)
    looks = lake.read("looks", columns=["look_id"], where=site)
    pairs = zip(
        products.column("product_id").to_pylist(), products.column("content_hash").to_pylist(), strict=True
    )
    return {
        "products": sorted({f"{product_id}\t{digest}" for product_id, digest in pairs}),
        "looks": sorted(set(looks.column("look_id").to_pylist())),
    }


def _split(lake: Lake, table: str, before: list[str]) -> tuple[list[str], list[str]]:
    """The table's fragments held at the baseline, and those written since."""
    held = set(before)
    earlier, since = [], []
    for path in lake.fragments(table):
        (earlier if os.path.basename(path) in held else since).append(path)
    return earlier, since


def _count(lake: Lake, source: str, run_key: str, baseline: dict[str, Any], directory: Path) -> CrawlResult:
    from lookbench_live.scrapers.journal import CrawlJournal

    result = CrawlResult(site=source, run_key=run_key)
    site = pads.field("source") == source
    if "fragments" in baseline:
        earlier, since = _split(lake, "products", baseline["fragments"]["products"])
        written = lake.read("products", columns=["product_id", "content_hash"], where=site, fragments=since)
        # `Lake.append` writes only keys it did not hold: each (id, content) here is new to the lake.
        entries = set(
            zip(*(written.column(n).to_pylist() for n in ("product_id", "content_hash")), strict=True)
        )
        ids = sorted({product_id for product_id, _ in entries})
        held = (
            lake.read(
                "products",
                columns=["product_id"],
                where=site & pads.field("product_id").isin(ids),
                fragments=earlier,
            )
            if ids
            else None
        )
        before_ids = set(held.column("product_id").to_pylist()) if held is not None else set()
        _, looks_since = _split(lake, "looks", baseline["fragments"]["looks"])
        looks = lake.read("looks", columns=["look_id"], where=site, fragments=looks_since)
        result.looks_new = len(set(looks.column("look_id").to_pylist()))
    else:
        # A baseline written before fragment snapshots (a run killed before an upgrade, resumed
        # after it): the products' (id, content) entries of this source, then and now.
        before = set(baseline["products"])
        before_ids = {entry.split("\t", 1)[0] for entry in before}
        now = _entries(lake, source)
        entries = {tuple(e.split("\t", 1)) for e in now["products"] if e not in before}
        result.looks_new = len(set(now["looks"]) - set(baseline["looks"]))
    for product_id, _ in sorted(entries):
        if product_id in before_ids:
            result.products_changed += 1
        else:
            result.products_new += 1
    rejections = lake.read(
        "rejections",
        columns=["item", "reason"],
        where=site & (pads.field("run_id") == run_key),
    )
    for item, reason in zip(
        rejections.column("item").to_pylist(), rejections.column("reason").to_pylist(), strict=True
    ):
        # `site:<name>` rows are the flow's verdicts on earlier attempts, not the crawl's own.
        if not item.startswith("site:"):
            result.rejections_by_reason[reason] = result.rejections_by_reason.get(reason, 0) + 1
    journal = CrawlJournal(directory)
    result.pages = journal.pages
    journal.close()
    return result


# --------------------------------------------------------------------------- the subprocess


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lookbench_live.scrapers.crawl")
    parser.add_argument("--site", required=True, help="SiteSettings as JSON")
    parser.add_argument("--crawl", required=True, help="CrawlSettings as JSON")
    parser.add_argument("--lake", required=True)
    parser.add_argument("--run-key", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--since", default=None)
    parser.add_argument("--seen-at", default=None)
    parser.add_argument("--frontier", default=None, help="JSON file: requests an earlier run left")
    parser.add_argument("--stop-after", type=float, default=None, help="seconds: stop cleanly (time limit)")
    args = parser.parse_args(argv)

    from scrapy.crawler import CrawlerProcess

    from lookbench_live.scrapers.extract import warm_up
    from lookbench_live.scrapers.settings import crawl_settings
    from lookbench_live.scrapers.spiders import SPIDERS

    site = SiteSettings.model_validate_json(args.site)
    crawl = CrawlSettings.model_validate_json(args.crawl)
    if site.platform == "playwright" and not crawl.playwright:
        from lookbench_live.schema.records import Rejection

        detail = "JavaScript rendering is off (crawl.playwright = false)"
        print(f"site {site.name}: {detail}", file=sys.stderr)
        rejection = Rejection(stage="crawl", item=site.base_url, reason="playwright_disabled", detail=detail,
                              source=site.name, run_id=args.run_key)  # fmt: skip
        Lake(args.lake).append([rejection])
        return 0
    proxy = None
    if site.platform == "playwright":
        from lookbench_live.scrapers.browser_guard import BrowserProxy
        from lookbench_live.scrapers.settings import site_authorities

        # Chromium's only way out (browser_guard.py): checked, pinned, bounded connections.
        proxy = BrowserProxy(
            private_authorities=site_authorities(site) if site.allow_private_addresses else set(),
            max_bytes=crawl.download_maxsize,
            deadline_s=crawl.download_timeout,
        )
        proxy.start()
    settings = crawl_settings(
        site,
        crawl,
        lake_home=args.lake,
        run_key=args.run_key,
        state_dir=args.state_dir,
        browser_proxy_port=proxy.port if proxy is not None else None,
    )
    settings["LOOKBENCH_SEEN_AT"] = args.seen_at
    if args.stop_after:
        # The time limit ends the crawl as a budget does (closespider_timeout: frontier saved).
        budget = float(settings.get("CLOSESPIDER_TIMEOUT") or args.stop_after)
        settings["CLOSESPIDER_TIMEOUT"] = min(budget, args.stop_after)
    warm_up()  # before the spider opens, not on its first page
    process = CrawlerProcess(settings=settings, install_root_handler=True)
    crawler = process.create_crawler(SPIDERS[site.platform])
    failures: list[str] = []
    frontier = json.loads(Path(args.frontier).read_text(encoding="utf-8")) if args.frontier else []
    deferred = process.crawl(
        crawler, site=site.model_dump(), state_dir=args.state_dir, since=args.since, frontier=frontier
    )
    deferred.addErrback(lambda failure: failures.append(failure.getTraceback()))
    process.start()
    if proxy is not None:
        proxy.stop()
    reason = crawler.stats.get_value("finish_reason") if crawler.stats else None
    if not failures and reason in ("finished", *BUDGET_REASONS):
        outcome = json.dumps({"finish_reason": reason}).encode()
        atomic_write_bytes(Lake(args.lake).fs, str(Path(args.state_dir) / OUTCOME_NAME), outcome)
    if failures or reason not in ("finished", *BUDGET_REASONS):
        print(f"crawl did not finish (finish_reason={reason}):", *failures, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
