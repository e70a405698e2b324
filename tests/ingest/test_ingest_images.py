"""`ingest_images` against a misbehaving server on 127.0.0.1: one outcome row per request (I12)."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
from collections import Counter

import pytest
from ingest_fixtures import EPS, HTML, encoded, jpeg, png_claiming
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings
from lookbench_live.ingest import ImageRequest, IngestAborted, ingest_images, pending_image_requests
from lookbench_live.schema.records import Look, Product
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)

SETTINGS = IngestSettings(
    allow_private_addresses=True,
    timeout=1.5,
    retries=1,
    retry_backoff=0.01,
    min_side=32,
    max_bytes=300_000,
    robots_timeout=2.0,
    concurrency=8,
    workers=0,
)

GOOD = jpeg(300, 400)
PNG_OK = encoded("PNG", 128, 160)


def routes() -> dict[str, Route]:
    big = jpeg(300, 300)
    return {
        "/robots.txt": Route(
            body=b"User-agent: *\nDisallow: /private/\n", headers={"Content-Type": "text/plain"}
        ),
        "/ok.jpg": Route(body=GOOD, headers={"Content-Type": "image/jpeg"}),
        "/ok.png": Route(body=PNG_OK, headers={"Content-Type": "text/html"}),  # wrong type, right bytes
        "/shared.jpg": Route(body=jpeg(200, 200, (0, 0, 255))),
        "/gone.jpg": Route(status=410),
        "/legal.jpg": Route(status=451),
        "/html.jpg": Route(body=HTML, headers={"Content-Type": "image/jpeg"}),
        "/empty.jpg": Route(body=b"", headers={"Content-Type": "image/jpeg"}),
        "/truncated.jpg": Route(body=big[: len(big) // 2]),
        "/bomb.png": Route(body=png_claiming(100_000, 100_000)),
        "/eps.jpg": Route(body=EPS),
        "/small.png": Route(body=encoded("PNG", 16, 16)),
        "/strip.png": Route(body=encoded("PNG", 1000, 40)),
        "/noai.jpg": Route(body=GOOD, headers={"X-Robots-Tag": "noai"}),
        "/noimageai.jpg": Route(body=GOOD, headers={"X-Robots-Tag": "lookbench-live: noimageai"}),
        "/otherbot.jpg": Route(body=jpeg(220, 220), headers={"X-Robots-Tag": "otherbot: noai"}),
        "/private/secret.jpg": Route(body=GOOD),
        "/loop-a": Route(status=302, headers={"Location": "/loop-b"}),
        "/loop-b": Route(status=302, headers={"Location": "/loop-a"}),
        "/moved.jpg": Route(status=301, headers={"Location": "/ok.png"}),
        "/huge.jpg": Route(body=b"", headers={"Content-Length": "5000000000"}),
        "/endless.jpg": Route(behaviour="endless_chunked"),
        "/gzip-bomb.jpg": Route(
            body=gzip.compress(b"\x00" * 5_000_000), headers={"Content-Encoding": "gzip"}
        ),
        "/gzip-ok.png": Route(body=gzip.compress(PNG_OK), headers={"Content-Encoding": "gzip"}),
        "/br.jpg": Route(body=b"xx", headers={"Content-Encoding": "br"}),
        "/slowloris.jpg": Route(behaviour="slow_drip"),
        "/silent.jpg": Route(behaviour="stall_before_headers"),
        "/reset.jpg": Route(behaviour="reset"),
        "/flaky.jpg": Route(body=jpeg(240, 240, (9, 9, 9)), fail_first=1),
        "/busy.jpg": Route(fail_first=100),
    }


EXPECTED = {
    "/ok.jpg": "ok",
    "/ok.png": "ok",
    "/shared.jpg": "ok",
    "/missing.jpg": "http_404",
    "/gone.jpg": "http_410",
    "/legal.jpg": "http_451",
    "/html.jpg": "not_an_image",
    "/empty.jpg": "empty_body",
    "/truncated.jpg": "truncated",
    "/bomb.png": "decompression_bomb",
    "/eps.jpg": "format_not_allowed",
    "/small.png": "too_small",
    "/strip.png": "aspect_ratio",
    "/noai.jpg": "opt_out_noai",
    "/noimageai.jpg": "opt_out_noai",
    "/otherbot.jpg": "ok",
    "/private/secret.jpg": "robots_disallowed",
    "/loop-a": "redirect_loop",
    "/moved.jpg": "ok",
    "/huge.jpg": "too_large",
    "/endless.jpg": "too_large",
    "/gzip-bomb.jpg": "too_large",
    "/gzip-ok.png": "ok",
    "/br.jpg": "bad_content_encoding",
    "/slowloris.jpg": "timeout",
    "/silent.jpg": "timeout",
    "/reset.jpg": "connection_error",
    "/flaky.jpg": "ok",
    "/busy.jpg": "http_503",
}


def request(url: str, owner: str = "shop:p1", position: int = 0, kind: str = "product") -> ImageRequest:
    return ImageRequest(
        url=url,
        owner_kind=kind,
        owner_id=owner,
        source="shop",
        position=position,
        first_seen_at=T0,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("workers", [0, 2], ids=["decode-in-threads", "decode-processes"])
def test_mixed_batch_gives_exactly_one_outcome_per_request(tmp_path, workers: int) -> None:
    lake = Lake(tmp_path / "lake")
    settings = SETTINGS.model_copy(update={"workers": workers})
    with serve(routes(), max_stall=6) as server:
        base = server.base
        requests = [request(base + path, position=i) for i, path in enumerate(EXPECTED)]
        requests.append(
            request(base + "/shared.jpg", owner="shop:look1", kind="look")
        )  # same URL, second owner
        requests += [
            request("file:///etc/passwd", position=90),
            request("ftp://127.0.0.1/x.jpg", position=91),
        ]
        result = ingest_images(lake, settings, requests, run_id="run-1")
        hits = dict(server.hits)

    rows = lake.read("images").to_pylist()
    # I12: every request has exactly one row, and the counts agree with the rows.
    assert len(rows) == len(requests) == result.ok + result.rejected
    assert Counter((r["owner_kind"], r["owner_id"], r["source_url"]) for r in rows).most_common(1)[0][1] == 1
    assert result.ok == sum(r["status"] == "ok" for r in rows)
    assert result.rejected_by_reason == dict(
        Counter(r["rejection_reason"] for r in rows if r["status"] == "rejected")
    )
    by_url = {(r["source_url"], r["owner_id"]): r for r in rows}
    outcome = {path: (by_url[(base + path, "shop:p1")]["rejection_reason"] or "ok") for path in EXPECTED}
    assert outcome == EXPECTED
    assert by_url[("file:///etc/passwd", "shop:p1")]["rejection_reason"] == "blocked_scheme"
    assert by_url[("ftp://127.0.0.1/x.jpg", "shop:p1")]["rejection_reason"] == "blocked_scheme"

    ok = by_url[(base + "/ok.jpg", "shop:p1")]
    assert ok["sha256"] == hashlib.sha256(GOOD).hexdigest() and lake.get_image(ok["sha256"]) == GOOD
    assert (ok["width"], ok["height"], ok["format"], ok["byte_size"]) == (300, 400, "JPEG", len(GOOD))
    assert ok["phash"] and ok["hash_method"] and ok["run_id"] == "run-1"
    assert by_url[(base + "/moved.jpg", "shop:p1")]["final_url"] == base + "/ok.png"
    assert by_url[(base + "/gzip-ok.png", "shop:p1")]["sha256"] == hashlib.sha256(PNG_OK).hexdigest()
    shared = [r for r in rows if r["source_url"] == base + "/shared.jpg"]
    assert {r["owner_kind"] for r in shared} == {"product", "look"} and len(
        {r["sha256"] for r in shared}
    ) == 1
    # Only validated bytes are stored.
    stored = {r["sha256"] for r in rows if r["status"] == "ok"}
    assert len(lake.fs.find(lake.path("images"))) == len(stored)
    # Final failures are not retried; transient ones are retried `retries` times.
    assert hits["/gone.jpg"] == 1 and hits["/legal.jpg"] == 1 and hits.get("/missing.jpg") == 1
    assert hits["/busy.jpg"] == 2 and hits["/flaky.jpg"] == 2
    assert hits.get("/private/secret.jpg", 0) == 0
    assert hits["/robots.txt"] == 1


def test_rerun_skips_what_has_a_row(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    with serve(routes()) as server:
        requests = [
            request(server.base + p, position=i) for i, p in enumerate(["/ok.jpg", "/gone.jpg", "/ok.png"])
        ]
        first = ingest_images(lake, SETTINGS, requests[:2], run_id="r1")  # as if killed after two
        second = ingest_images(lake, SETTINGS, requests, run_id="r2")
        assert server.hits["/ok.jpg"] == 1 and server.hits["/gone.jpg"] == 1 and server.hits["/ok.png"] == 1
    assert (first.ok, first.rejected, first.skipped_existing) == (1, 1, 0)
    assert (second.ok, second.rejected, second.skipped_existing) == (1, 0, 2)
    assert lake.read("images").num_rows == 3


def test_private_addresses_are_refused_unless_allowed(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    strict = SETTINGS.model_copy(update={"allow_private_addresses": False})
    with serve(routes()) as server:
        result = ingest_images(lake, strict, [request(server.base + "/ok.jpg")], run_id="r")
        assert server.hits == {}  # refused before connecting, robots.txt included
    assert result.rejected_by_reason == {"blocked_address": 1}


def test_odd_and_private_spellings_get_the_guards_reason(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    strict = SETTINGS.model_copy(update={"allow_private_addresses": False, "retries": 0})
    urls = {
        "http://0177.0.0.1/x.jpg": "blocked_address",  # httpx calls it invalid; the resolver says loopback
        "http://0x7f.1/x.jpg": "blocked_address",
        "http://[::ffff:127.0.0.1]/x.jpg": "blocked_address",
        "http:///no-host.jpg": "blocked_scheme",
        "not a url": "blocked_scheme",
        "data:image/png;base64,AAAA": "blocked_scheme",
    }
    result = ingest_images(lake, strict, [request(u) for u in urls], run_id="r")
    rows = {r["source_url"]: r["rejection_reason"] for r in lake.read("images").to_pylist()}
    assert rows == urls and result.rejected == len(urls)


def test_robots_unreachable_fails_closed(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    table = routes()
    table["/robots.txt"] = Route(status=503, body=b"<html>down</html>")
    with serve(table) as server:
        result = ingest_images(lake, SETTINGS, [request(server.base + "/ok.jpg")], run_id="r")
        assert server.hits.get("/ok.jpg", 0) == 0
    assert result.rejected_by_reason == {"robots_unreachable": 1}


def test_missing_robots_allows_all(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    table = routes()
    del table["/robots.txt"]
    with serve(table) as server:
        result = ingest_images(lake, SETTINGS, [request(server.base + "/private/secret.jpg")], run_id="r")
    assert result.ok == 1


def test_pending_requests_come_from_latest_products_and_looks(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    old = Product(
        product_id="p1", source="shop", platform="shopify", url="u", images=["http://x/a.jpg"],
        first_seen_at=T0, content_hash="h1", created_at=T0,
    )  # fmt: skip
    new = old.model_copy(
        update={"content_hash": "h2", "images": ["http://x/b.jpg", "http://x/b.jpg", "http://x/c.jpg"],
                "created_at": T0 + dt.timedelta(days=1)}
    )  # fmt: skip
    look = Look(look_id="l1", source="shop", url="u", photo_url="http://x/look.jpg", first_seen_at=T0)
    lake.append([old, new])
    lake.append([look])
    pending = pending_image_requests(lake)
    assert [(r.owner_kind, r.owner_id, r.url, r.position) for r in pending] == [
        ("product", "shop:p1", "http://x/b.jpg", 0),
        ("product", "shop:p1", "http://x/c.jpg", 2),
        ("look", "shop:l1", "http://x/look.jpg", 0),
    ]
    # Rejections count as done: pending shrinks to what has no row at all.
    settings = SETTINGS.model_copy(update={"retries": 0, "allow_private_addresses": False})
    result = ingest_images(lake, settings, pending[:2], run_id="r")
    assert result.rejected == 2
    assert [r.url for r in pending_image_requests(lake)] == ["http://x/look.jpg"]


class FullDiskLake(Lake):
    """Refuses to store image bytes after `room` images, like a disk that fills up."""

    room = 2

    def put_image(self, data: bytes) -> str:
        if self.room <= 0:
            raise OSError(28, "No space left on device")
        self.room -= 1
        return super().put_image(data)


def test_a_full_disk_stops_the_run_without_blaming_images(tmp_path) -> None:
    lake = FullDiskLake(tmp_path / "lake")
    table = {f"/{i}.jpg": Route(body=jpeg(100, 100, (i, 2 * i, 3 * i))) for i in range(6)}
    settings = SETTINGS.model_copy(update={"concurrency": 1, "shard_size": 1})
    with serve(table) as server:
        requests = [request(f"{server.base}/{i}.jpg", position=i) for i in range(6)]
        with pytest.raises(IngestAborted, match="No space left"):
            ingest_images(lake, settings, requests, run_id="r")
    rows = lake.read("images").to_pylist()
    # What was stored keeps its row; nothing is recorded as a bad image; a rerun does the rest.
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    assert sum(r.key() not in lake.keys("images") for r in requests) == 4
