"""Rules with one home (issue 26 §2), each tested once by a table run through every caller:
drops by reason, the known-dataset limits, the chat endpoint settings, the network constants and
time parsing. Retry-After and backoff: tests/core/test_retry_rules.py."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
import typer
from PIL import Image
from pydantic import ValidationError
from scrapy.utils.test import get_crawler
from typer.testing import CliRunner

from lookbench_live.annotation.endpoint import ChatEndpoint
from lookbench_live.annotation.pool import pool_for
from lookbench_live.cli import app
from lookbench_live.config import (
    AnnotationSettings,
    CrawlSettings,
    DedupSettings,
    IngestSettings,
    JudgeSettings,
    SiteSettings,
    agent_string,
)
from lookbench_live.dedup.known import hash_files
from lookbench_live.evaluation.report import _lake_reasons
from lookbench_live.flows.preflight import OptionError, parse_date_option
from lookbench_live.flows.summary import rejection_counts
from lookbench_live.ingest import http as ingest_http
from lookbench_live.ingest import robots as ingest_robots
from lookbench_live.ingest.downloader import ImageDownloader
from lookbench_live.network import limits, netguard
from lookbench_live.network import robots as network_robots
from lookbench_live.schema.moments import parse_moment
from lookbench_live.scrapers import resolver
from lookbench_live.scrapers.extract.model import parse_datetime
from lookbench_live.scrapers.middlewares import RobotsGateMiddleware
from lookbench_live.scrapers.pipelines import LakePipeline
from lookbench_live.scrapers.settings import crawl_settings
from lookbench_live.warehouse.card import _moment
from lookbench_live.warehouse.cli import parse_window

# ------------------------------------------------------------------ drops by reason


class TablesLake:
    """What the drop count reads of a lake: `dataset(table)` (its DuckDB aggregates) and
    `read(table, columns)`."""

    def __init__(self, tables: dict[str, dict[str, list[Any]]]):
        self.tables = tables

    def read(self, name: str, columns: list[str] | None = None) -> pa.Table:
        table = pa.table(self.tables[name])
        return table.select(columns) if columns else table

    def dataset(self, name: str) -> pads.Dataset:
        return pads.dataset(pa.table(self.tables[name]))


DROPS_LAKE = {
    "images": {
        "status": ["ok", "rejected", "rejected"],
        "rejection_reason": [None, "too_small", "too_small"],
    },
    "rejections": {"stage": ["crawl", "release"], "reason": ["robots_disallowed", "no_gallery"]},
    "dedup_decisions": {"decision": ["kept", "dropped"], "reason": [None, "near_duplicate"]},
    "annotations": {"status": ["ok", "failed"], "error": [None, "llm_timeout: no answer within 1 s"]},
    "generations": {"status": ["failed", "ok"], "error": ["out_of_memory: CUDA", None]},
}
DROPS = {
    ("ingest", "too_small"): 2,
    ("crawl", "robots_disallowed"): 1,
    ("release", "no_gallery"): 1,
    ("dedup", "near_duplicate"): 1,
    ("annotate", "llm_timeout"): 1,
    ("generate", "out_of_memory"): 1,  # the report used to leave generation failures out
}


def summary_drops(lake: Any) -> dict[tuple[str, str], int]:
    """The run summary's and the manifest's `rejections_by_reason` ({"stage/reason": n})."""
    return {tuple(key.split("/", 1)): n for key, n in rejection_counts(lake).items()}  # type: ignore[misc]


def report_drops(lake: Any) -> dict[tuple[str, str], int]:
    """The release report's drops block."""
    [block] = [b for b in _lake_reasons(lake) if b["title"] == "Drops by stage and reason"]
    return {(stage, reason): n for stage, reason, n in block["rows"]}


@pytest.mark.parametrize("caller", [summary_drops, report_drops], ids=["summary/manifest", "report"])
def test_the_summary_and_the_report_count_drops_alike(caller: Callable[[Any], dict]) -> None:
    assert caller(TablesLake(DROPS_LAKE)) == DROPS


# ------------------------------------------------------------------ the known-dataset limits


def _image(fmt: str, size: tuple[int, int] = (80, 60)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (120, 30, 60)).save(out, format=fmt)
    return out.getvalue()


def hash_in_process(files: list[Path], settings: DedupSettings, config: Path) -> dict[str, str | None]:
    result = hash_files(files, settings=settings)
    failed = {Path(path).name: reason for path, reason in result.failures}
    return {f.name: failed.get(f.name) for f in files}


def hash_command(files: list[Path], settings: DedupSettings, config: Path) -> dict[str, str | None]:
    """`lookbench-live hash --config` with the same settings in its TOML file."""
    formats = ", ".join(f'"{f}"' for f in settings.known_dataset_formats)
    config.write_text(
        f"[dedup]\nknown_dataset_formats = [{formats}]\nknown_dataset_max_pixels = {settings.known_dataset_max_pixels}\n"
    )
    out = config.with_suffix(".parquet")
    result = CliRunner().invoke(app, ["hash", *map(str, files), "--out", str(out), "--config", str(config)])
    skipped = {
        Path(line.split(": ", 1)[0].removeprefix("skipped ")).name: line.split(": ", 1)[1]
        for line in result.output.splitlines()
        if line.startswith("skipped ")
    }
    return {f.name: skipped.get(f.name) for f in files}


# name: (settings, {file: None if hashed, else a word of the reason})
KNOWN = {
    "defaults": (DedupSettings(), {"a.jpg": None, "b.bmp": None, "c.tif": None}),
    "JPEG only": (DedupSettings(known_dataset_formats=["JPEG"]), {"a.jpg": None, "b.bmp": "formats"}),
    "a small pixel cap": (
        DedupSettings(known_dataset_max_pixels=80 * 60 - 1),
        {"a.jpg": "pixels", "b.bmp": "pixels"},
    ),
}


@pytest.mark.parametrize("row", list(KNOWN))
def test_the_config_sets_what_the_known_dataset_hasher_decodes(row: str, tmp_path: Path) -> None:
    settings, expected = KNOWN[row]
    kinds = {".jpg": "JPEG", ".bmp": "BMP", ".tif": "TIFF"}
    files = []
    for name in expected:
        path = tmp_path / name
        path.write_bytes(_image(kinds[path.suffix]))
        files.append(path)
    for caller in (hash_in_process, hash_command):
        observed = caller(files, settings, tmp_path / "c.toml")
        for name, word in expected.items():
            if word is None:
                assert observed[name] is None, (caller.__name__, name, observed[name])
            else:
                assert word in (observed[name] or ""), (caller.__name__, name, observed[name])


def test_the_known_dataset_pixel_cap_stays_under_pillows_own() -> None:
    with pytest.raises(ValidationError):
        DedupSettings(known_dataset_max_pixels=90_000_000)
    with pytest.raises(ValidationError):
        DedupSettings(known_dataset_formats=[])


# ------------------------------------------------------------------ the chat endpoint settings

ENDPOINT = {
    "timeout": 7.0,
    "max_retries": 2,
    "concurrency": 3,
    "retry_base_delay": 0.25,
    "retry_max_delay": 9.0,
    "max_retry_after": 5.0,
}


def annotation_endpoint(values: dict[str, Any]) -> ChatEndpoint:
    [endpoint] = pool_for(AnnotationSettings(base_url="http://127.0.0.1:9/v1", **values)).members
    return endpoint.endpoint


def judge_endpoint(values: dict[str, Any]) -> ChatEndpoint:
    settings = JudgeSettings(base_url="http://127.0.0.1:9/v1", **values)
    return ChatEndpoint.from_settings(settings, base_url=settings.base_url, api_key=None)


@pytest.mark.parametrize("caller", [annotation_endpoint, judge_endpoint], ids=["annotation", "judge"])
def test_annotation_and_the_judge_read_one_endpoint_settings_type(
    caller: Callable[..., ChatEndpoint],
) -> None:
    endpoint = caller(ENDPOINT)
    assert {key: getattr(endpoint, key) for key in ENDPOINT if key != "concurrency"} == {
        k: v for k, v in ENDPOINT.items() if k != "concurrency"
    }
    assert endpoint._concurrency == ENDPOINT["concurrency"]


@pytest.mark.parametrize("settings", [AnnotationSettings, JudgeSettings])
@pytest.mark.parametrize("url", ["ftp://judge.example/v1", "http://user:secret@judge.example/v1", "judge"])
def test_a_bad_endpoint_url_is_refused_for_annotation_and_the_judge(settings: type, url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        settings(base_url=url)
    assert "secret" not in str(refused.value)


# ------------------------------------------------------------------ the network constants


def _scrapy(crawl: CrawlSettings) -> dict[str, Any]:
    site = SiteSettings(name="s", platform="shopify", base_url="https://shop.example")
    return crawl_settings(site, crawl, lake_home="/tmp/l", run_key="k", state_dir="/tmp/s")


def _gate() -> RobotsGateMiddleware:
    crawler = get_crawler(settings_dict={})
    return RobotsGateMiddleware(crawler)


# constant: (its value in network.limits, {caller: what the caller uses})
NETWORK: dict[str, tuple[Any, dict[str, Callable[[], Any]]]] = {
    "user agent": (
        agent_string(limits.USER_AGENT, CrawlSettings().contact_url),
        {
            "crawl (Scrapy)": lambda: _scrapy(CrawlSettings())["USER_AGENT"],
            "ingest": lambda: ImageDownloader(IngestSettings()).client.user_agent,
        },
    ),
    "robots token": (
        limits.BOT_NAME,
        {
            "crawl robots gate": lambda: _gate().user_agent,
            "ingest robots": lambda: ImageDownloader(IngestSettings()).token,
        },
    ),
    "timeout": (
        limits.DOWNLOAD_TIMEOUT_S,
        {
            "crawl": lambda: CrawlSettings().download_timeout,
            "crawl robots gate": lambda: _gate().timeout,
            "ingest": lambda: IngestSettings().timeout,
        },
    ),
    "robots.txt bytes": (
        limits.ROBOTS_MAX_BYTES,
        {
            "crawl": lambda: CrawlSettings().robots_max_bytes,
            "crawl robots gate": lambda: _gate().max_bytes,
            "ingest": lambda: ingest_robots.ROBOTS_MAX_BYTES,
        },
    ),
    "robots.txt error TTL": (
        limits.ROBOTS_ERROR_TTL_S,
        {
            "crawl": lambda: CrawlSettings().robots_error_ttl,
            "crawl robots gate": lambda: _gate().error_ttl,
            "ingest": lambda: IngestSettings().robots_error_ttl,
        },
    ),
    "Crawl-delay maximum": (
        limits.MAX_CRAWL_DELAY_S,
        {
            "crawl": lambda: CrawlSettings().max_crawl_delay,
            "crawl robots gate": lambda: _gate().max_crawl_delay,
            "ingest": lambda: IngestSettings().max_crawl_delay,
        },
    ),
    "redirects": (
        limits.MAX_REDIRECTS,
        {
            "address guard": lambda: netguard.MAX_REDIRECTS,
            "crawl robots gate": lambda: network_robots.MAX_ROBOTS_REDIRECTS,
            "ingest": lambda: IngestSettings().max_redirects,
        },
    ),
    "resolution TTL": (
        limits.RESOLUTION_TTL_S,
        {
            "address guard": lambda: netguard.RESOLUTION_TTL_S,
            "crawl resolver": lambda: resolver.PIN_TTL_S,
            "ingest": lambda: ingest_http.RESOLUTION_TTL_S,
        },
    ),
    "size caps": (
        (limits.PAGE_MAX_BYTES, limits.IMAGE_MAX_BYTES),
        {"crawl and ingest": lambda: (CrawlSettings().download_maxsize, IngestSettings().max_bytes)},
    ),
}


@pytest.mark.parametrize("constant", list(NETWORK))
def test_crawl_and_ingest_take_each_network_constant_from_one_place(constant: str) -> None:
    value, callers = NETWORK[constant]
    assert {name: read() for name, read in callers.items()} == dict.fromkeys(callers, value)


# ------------------------------------------------------------------ time parsing

UTC = dt.UTC
# text: the moment every caller reads (None: refused)
MOMENTS: dict[str, dt.datetime | None] = {
    "2026-11-01": dt.datetime(2026, 11, 1, tzinfo=UTC),
    "2026-11-01T06:30:00": dt.datetime(2026, 11, 1, 6, 30, tzinfo=UTC),  # naive is UTC
    "2026-11-01T06:30:00Z": dt.datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
    "2026-11-01T08:30:00+02:00": dt.datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
    "2026-11-01 06:30:00+00:00": dt.datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
    "Nov 1st": None,
}


def cli_window(text: str) -> dt.datetime | None:
    try:
        return parse_window(f"{text}..")[0]
    except typer.BadParameter:
        return None


def flow_option(text: str) -> dt.datetime | None:
    try:
        return parse_date_option("--as-of", text)
    except OptionError:
        return None


def crawl_pipeline(text: str) -> dt.datetime | None:
    try:
        return LakePipeline("/tmp/l", "s", "k", "/tmp/s", 10, seen_at=text).seen_at
    except ValueError:
        return None


def card_moment(text: str) -> dt.datetime | None:
    try:
        shown = _moment(text)
    except ValueError:
        return None
    return parse_moment(shown)


TIME_CALLERS: dict[str, Callable[[str], dt.datetime | None]] = {
    "CLI --window": cli_window,
    "flow --as-of/--since": flow_option,
    "crawl items' first_seen_at": crawl_pipeline,
    "dataset card": card_moment,
    "extracted page dates": parse_datetime,
}


@pytest.mark.parametrize("text", list(MOMENTS))
def test_every_caller_reads_a_moment_alike(text: str) -> None:
    expected = MOMENTS[text]
    observed = {name: read(text) for name, read in TIME_CALLERS.items()}
    assert observed == dict.fromkeys(TIME_CALLERS, expected)
