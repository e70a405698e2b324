"""Per-host pacing of image fetches (issue 12 §3): Crawl-delay, Retry-After in both forms, parking.

Against a loopback server that records when each request arrived. Only lower bounds on
gaps are asserted (a loaded machine makes gaps longer, never shorter).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import itertools
import time

from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings
from lookbench_live.ingest import ImageRequest, ingest_images
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
SETTINGS = IngestSettings(
    allow_private_addresses=True,
    workers=0,
    min_side=32,
    timeout=5,
    retries=1,
    retry_backoff=0.01,
    concurrency=8,
)


def requests(urls: list[str]) -> list[ImageRequest]:
    return [
        ImageRequest(
            url=u, owner_kind="product", owner_id=f"shop:p{i}", source="shop", position=0, first_seen_at=T0
        )
        for i, u in enumerate(urls)
    ]


def outcomes(lake: Lake) -> dict[str, str]:
    return {
        r["source_url"].rsplit("/", 1)[1]: r["rejection_reason"] or r["status"]
        for r in lake.read("images").to_pylist()
    }


def starts(server, paths: list[str]) -> list[float]:
    return sorted(t for p in paths for t in server.times.get(p, []))


def test_crawl_delay_of_the_image_host_spaces_its_requests(tmp_path) -> None:
    routes = {
        "/robots.txt": Route(body=b"User-agent: *\nCrawl-delay: 0.4\n"),
        **{f"/{i}.jpg": Route(body=jpeg(64, 64, (i, 9, 9))) for i in range(4)},
    }
    with serve(routes) as server:
        lake = Lake(tmp_path / "lake")
        result = ingest_images(lake, SETTINGS, requests([f"{server.base}/{i}.jpg" for i in range(4)]), "r")
        times = starts(server, [f"/{i}.jpg" for i in range(4)])
    assert result.ok == 4
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) == 4 and min(gaps) >= 0.35, gaps  # 8 fetches in flight, yet one every 0.4 s


def test_crawl_delay_over_the_maximum_disallows_the_host(tmp_path) -> None:
    routes = {"/robots.txt": Route(body=b"User-agent: *\nCrawl-delay: 3600\n"), "/a.jpg": Route(body=jpeg())}
    with serve(routes) as server:
        lake = Lake(tmp_path / "lake")
        ingest_images(lake, SETTINGS, requests([f"{server.base}/a.jpg"]), "r")
        assert server.hits.get("/a.jpg", 0) == 0
    assert outcomes(lake) == {"a.jpg": "crawl_delay_too_long"}


def _retry_after_is_honoured(tmp_path, header: str, minimum: float) -> None:
    routes = {
        "/busy.jpg": Route(
            body=jpeg(80, 80), fail_first=1, fail_status=429, fail_headers={"Retry-After": header}
        ),
        "/later.jpg": Route(body=jpeg(90, 90), delay=0.0),
    }
    settings = SETTINGS.model_copy(update={"concurrency": 1})
    with serve(routes) as server:
        lake = Lake(tmp_path / "lake")
        urls = [f"{server.base}/busy.jpg", f"{server.base}/later.jpg"]
        result = ingest_images(lake, settings, requests(urls), "r")
        first, retry = server.times["/busy.jpg"]
        (later,) = server.times["/later.jpg"]
    assert result.ok == 2
    assert retry - first >= minimum, retry - first
    assert later - first >= minimum  # the whole host waited, not just the URL that got the 429


def test_retry_after_in_seconds(tmp_path) -> None:
    _retry_after_is_honoured(tmp_path, "2", 1.9)


def test_retry_after_as_an_http_date(tmp_path) -> None:
    # Whole seconds: a date 3 s ahead is 2 to 3 s ahead once truncated.
    _retry_after_is_honoured(tmp_path, email.utils.formatdate(time.time() + 3, usegmt=True), 1.9)


def test_a_retry_after_too_long_ends_the_url_and_parks_the_host(tmp_path) -> None:
    routes = {
        "/busy.jpg": Route(fail_first=100, fail_status=503, fail_headers={"Retry-After": "86400"}),
        **{f"/{i}.jpg": Route(body=jpeg(64, 64, (i, 1, 1))) for i in range(3)},
    }
    settings = SETTINGS.model_copy(update={"concurrency": 1, "max_retry_after": 60})
    with serve(routes) as server:
        lake = Lake(tmp_path / "lake")
        urls = [f"{server.base}/busy.jpg", *(f"{server.base}/{i}.jpg" for i in range(3))]
        started = time.monotonic()
        ingest_images(lake, settings, requests(urls), "r")
        elapsed = time.monotonic() - started
        assert server.hits["/busy.jpg"] == 1 and sum(server.hits.get(f"/{i}.jpg", 0) for i in range(3)) == 0
    assert outcomes(lake) == {
        "busy.jpg": "http_503",
        "0.jpg": "host_parked",
        "1.jpg": "host_parked",
        "2.jpg": "host_parked",
    }
    assert elapsed < 30  # nobody waited a day


def test_a_host_that_keeps_failing_is_parked_with_its_reason(tmp_path) -> None:
    routes = {f"/{i}.jpg": Route(fail_first=100) for i in range(6)}
    settings = SETTINGS.model_copy(update={"concurrency": 1, "retries": 1, "host_park_after": 3})
    with serve(routes) as server:
        lake = Lake(tmp_path / "lake")
        ingest_images(lake, settings, requests([f"{server.base}/{i}.jpg" for i in range(6)]), "r")
        hits = sum(n for path, n in server.hits.items() if path != "/robots.txt")
    rows = {r["source_url"].rsplit("/", 1)[1]: r for r in lake.read("images").to_pylist()}
    assert rows["0.jpg"]["rejection_reason"] == "http_503"  # two attempts
    assert all(rows[f"{i}.jpg"]["rejection_reason"] == "host_parked" for i in range(1, 6))
    assert "3 failed attempts in a row, the last http_503" in rows["5.jpg"]["detail"]
    assert hits == 3  # two attempts of 0.jpg, one of 1.jpg, then none
