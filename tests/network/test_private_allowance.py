"""The private-address allowance is an origin, not a host name (issue 24 §4).

A site allowed private addresses at `http://127.0.0.1:S` may have its images (and their
robots.txt) fetched from that origin only. The same loopback host on another port is
another server: an image there, asked for directly or reached by a redirect from the
allowed origin, is refused (`blocked_address`), nothing is stored, and no request (not
even for robots.txt) reaches the other port.
"""

from __future__ import annotations

import datetime as dt

from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings, SiteSettings
from lookbench_live.ingest import ImageRequest, ingest_images, site_private_hosts
from lookbench_live.network.netguard import PrivateAllowance
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
SETTINGS = IngestSettings(timeout=3, retries=0, min_side=32, robots_timeout=2.0, workers=0)


def request(url: str, position: int) -> ImageRequest:
    return ImageRequest(
        url=url, owner_kind="product", owner_id="shop:p1", source="shop", position=position,
        first_seen_at=T0,  # type: ignore[arg-type]
    )  # fmt: skip


def test_another_port_of_an_allowed_host_is_refused_directly_and_by_redirect(tmp_path) -> None:
    image = jpeg(120, 120)
    with serve({"/secret.jpg": Route(body=image)}) as other:
        elsewhere = f"{other.base}/secret.jpg"
        own_routes = {
            "/ok.jpg": Route(body=jpeg(120, 120, (10, 200, 30))),
            "/hop.jpg": Route(status=302, headers={"Location": elsewhere}),
        }
        with serve(own_routes) as own:
            site = SiteSettings(
                name="shop", platform="shopify", base_url=own.base, allow_private_addresses=True
            )
            lake = Lake(tmp_path / "lake")
            result = ingest_images(
                lake,
                SETTINGS,
                [request(f"{own.base}/ok.jpg", 0), request(elsewhere, 1), request(f"{own.base}/hop.jpg", 2)],
                run_id="r",
                private_hosts=site_private_hosts([site]),
            )
    rows = {r["source_url"]: r for r in lake.read("images").to_pylist()}
    assert rows[f"{own.base}/ok.jpg"]["status"] == "ok"
    for url in (elsewhere, f"{own.base}/hop.jpg"):
        assert rows[url]["status"] == "rejected"
        assert rows[url]["rejection_reason"] == "blocked_address"
        assert rows[url]["sha256"] is None
    assert result.ok == 1
    # Nothing was asked of the other port: not the image, not its robots.txt.
    assert sum(other.hits.values()) == 0
    # The allowed origin was asked for its own image and the redirect, nothing else stored.
    assert own.hits["/ok.jpg"] == 1 and own.hits["/hop.jpg"] == 1


def test_the_allowance_compares_scheme_host_and_port() -> None:
    allowance = PrivateAllowance.for_site(
        "http://shop.test:8000", ["img.shop.test", "cdn.shop.test:9000", "https://media.shop.test"]
    )
    assert allowance.allows("http://shop.test:8000/a.jpg")
    assert allowance.allows("http://SHOP.test:8000/a.jpg")
    assert not allowance.allows("http://shop.test:8001/a.jpg")  # another port
    assert not allowance.allows("https://shop.test:8000/a.jpg")  # another scheme
    assert not allowance.allows("http://shop.test/a.jpg")  # port 80
    assert allowance.allows("http://img.shop.test:8000/b.jpg")  # a bare image host: the site's port
    assert not allowance.allows("http://img.shop.test:8001/b.jpg")
    assert allowance.allows("http://cdn.shop.test:9000/c.jpg")
    assert allowance.allows("https://media.shop.test/d.jpg")  # a full origin: its default port
    assert not allowance.allows("http://media.shop.test/d.jpg")
    default = PrivateAllowance.for_site("https://shop.test")
    assert default.allows("https://shop.test:443/x") and not default.allows("https://shop.test:8443/x")
