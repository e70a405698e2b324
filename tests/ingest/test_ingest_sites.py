"""A store configured by hand (issue 13 §2, X7): a site allowed private addresses gets its images.

The TOML a new user writes: three `[[crawl.sites]]` of different platforms on one loopback
host with `allow_private_addresses = true`. Their images come through the real flow task
(`ingest_shard`, which reads the sites from the config); the allowance covers the site's own
host and the hosts it lists in `image_hosts`, and nothing else: another site's images on
the same private host, and the allowed site's images on an unlisted private host, stay
`blocked_address`.
"""

from __future__ import annotations

import datetime as dt

import pytest
from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.flows import stages
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.ingest import pending_image_requests
from lookbench_live.network import netguard
from lookbench_live.schema.records import Product
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
NAMES = {"shop.test": "127.0.0.1", "img.shop.test": "127.0.0.1", "other.test": "127.0.0.1"}

TOML = """
[ingest]
workers = 0
timeout = 5
retries = 0
min_side = 32

[[crawl.sites]]
name = "dresses"
platform = "schema_org"
base_url = "http://shop.test:{port}"
allow_private_addresses = true
image_hosts = ["img.shop.test"]

[[crawl.sites]]
name = "shoes"
platform = "shopify"
base_url = "http://shop.test:{port}"
allow_private_addresses = true

[[crawl.sites]]
name = "bags"
platform = "woocommerce"
base_url = "http://shop.test:{port}"
allow_private_addresses = true

[[crawl.sites]]
name = "elsewhere"
platform = "shopify"
base_url = "https://elsewhere.example"
"""


def product(source: str, pid: str, images: list[str]) -> Product:
    return Product(
        product_id=pid, source=source, platform="shopify", url=f"http://shop.test/{pid}", images=images,
        first_seen_at=T0, content_hash=pid, created_at=T0,
    )  # fmt: skip


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> None:
    # The guard resolves these names to the loopback server, as a hosts file or LAN DNS would.
    monkeypatch.setattr(netguard, "resolve", lambda host, port: [NAMES.get(host, "93.184.215.14")])


def test_an_allowed_sites_images_are_ingested_and_nothing_else_private(tmp_path, names) -> None:
    routes = {f"/{i}.jpg": Route(body=jpeg(120, 120, (i * 20, 40, 90))) for i in range(8)}
    with serve(routes) as server:
        port = server.server_address[1]
        config = tmp_path / "lookbench.toml"
        config.write_text(TOML.format(port=port))
        home = tmp_path / "lake"
        lake = Lake(home)
        shop, img, other = (f"http://{h}:{port}" for h in ("shop.test", "img.shop.test", "other.test"))
        lake.append(
            [
                product("dresses", "d1", [f"{shop}/0.jpg", f"{img}/1.jpg", f"{other}/2.jpg"]),
                product("shoes", "s1", [f"{shop}/3.jpg", f"{shop}/4.jpg"]),
                product("bags", "b1", [f"{shop}/5.jpg"]),
                product("bags", "b2", [f"{img}/6.jpg"]),  # img.shop.test is only listed by "dresses"
                product("elsewhere", "e1", [f"{shop}/7.jpg"]),  # a site without the allowance
            ]
        )
        spec = RunSpec(
            flow="refresh", home=str(home), config_path=str(config), as_of=T0,
            version="2026-05", window_start=None, window_end=None,
        )  # fmt: skip
        summary = stages.ingest_shard.fn(spec, pending_image_requests(lake), "0")
    rows = {(r["owner_id"], r["source_url"].rsplit("/", 1)[1]): r for r in lake.read("images").to_pylist()}
    outcome = {key: r["rejection_reason"] or r["status"] for key, r in rows.items()}
    assert outcome == {
        ("dresses:d1", "0.jpg"): "ok",
        ("dresses:d1", "1.jpg"): "ok",  # a listed image host
        ("dresses:d1", "2.jpg"): "blocked_address",  # private, not listed
        ("shoes:s1", "3.jpg"): "ok",
        ("shoes:s1", "4.jpg"): "ok",
        ("bags:b1", "5.jpg"): "ok",
        ("bags:b2", "6.jpg"): "blocked_address",  # another site's listed host
        ("elsewhere:e1", "7.jpg"): "blocked_address",  # same host, site without the allowance
    }
    assert summary["ok"] == 5
    assert all(lake.has_image(r["sha256"]) for r in rows.values() if r["status"] == "ok")
    # Nothing refused was requested from the server.
    assert server.hits.get("/2.jpg", 0) == server.hits.get("/6.jpg", 0) == server.hits.get("/7.jpg", 0) == 0
