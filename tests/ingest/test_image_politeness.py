"""Politeness for image fetches (issue 24 §10): the site's download_delay, a per-host cap on
requests in flight, the crawl's contact in the User-Agent, and `tdm-reservation: 1` honoured.
"""

from __future__ import annotations

import datetime as dt
import itertools

import pydantic
import pytest
from ingest_fixtures import jpeg
from ingest_server import Route, serve

from lookbench_live.config import IngestSettings, SiteSettings, load_settings
from lookbench_live.flows import stages
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.ingest import (
    ImageRequest,
    ingest_images,
    pending_image_requests,
    site_download_delays,
)
from lookbench_live.schema.records import Product
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
SETTINGS = IngestSettings(
    allow_private_addresses=True, timeout=5, retries=0, min_side=32, robots_timeout=2.0, workers=0
)


def request(url: str, position: int = 0, source: str = "shop") -> ImageRequest:
    return ImageRequest(
        url=url, owner_kind="product", owner_id=f"{source}:p1", source=source, position=position,
        first_seen_at=T0,  # type: ignore[arg-type]
    )  # fmt: skip


def outcomes(lake: Lake) -> dict[str, str]:
    return {
        r["source_url"].rsplit("/", 1)[1]: r["rejection_reason"] or r["status"]
        for r in lake.read("images").to_pylist()
    }


def test_a_tdm_reservation_on_an_image_is_an_opt_out_and_nothing_is_stored(tmp_path) -> None:
    routes = {
        "/reserved.jpg": Route(body=jpeg(120, 120), headers={"tdm-reservation": "1"}),
        "/free.jpg": Route(body=jpeg(120, 120, (9, 9, 200)), headers={"tdm-reservation": "0"}),
    }
    lake = Lake(tmp_path / "lake")
    with serve(routes) as server:
        result = ingest_images(
            lake, SETTINGS, [request(f"{server.base}/reserved.jpg", 0), request(f"{server.base}/free.jpg", 1)],
            run_id="r",
        )  # fmt: skip
    assert outcomes(lake) == {"reserved.jpg": "opt_out_tdm", "free.jpg": "ok"}
    assert result.ok == 1 and result.rejected_by_reason == {"opt_out_tdm": 1}
    rows = {r["source_url"]: r for r in lake.read("images").to_pylist()}
    assert rows[f"{server.base}/reserved.jpg"]["sha256"] is None
    assert "tdm-reservation" in rows[f"{server.base}/reserved.jpg"]["detail"]


def test_the_sites_download_delay_spaces_its_image_requests(tmp_path) -> None:
    routes = {f"/{i}.jpg": Route(body=jpeg(120, 120, (i * 40, 10, 10))) for i in range(4)}
    site = SiteSettings(name="shop", platform="shopify", base_url="https://shop.example", download_delay=0.3)
    lake = Lake(tmp_path / "lake")
    with serve(routes) as server:
        ingest_images(
            lake, SETTINGS, [request(f"{server.base}/{i}.jpg", i) for i in range(4)], run_id="r",
            site_delays=site_download_delays([site]),
        )  # fmt: skip
        starts = sorted(t for i in range(4) for t in server.times[f"/{i}.jpg"])
    assert set(outcomes(lake).values()) == {"ok"}
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.25, gaps  # 32 workers, yet one request per 0.3 s to the host


def test_requests_in_flight_to_one_host_are_capped(tmp_path) -> None:
    routes = {f"/{i}.jpg": Route(body=jpeg(120, 120, (i * 20, 10, 10)), delay=0.2) for i in range(8)}
    settings = SETTINGS.model_copy(update={"per_host_concurrency": 2, "concurrency": 8})
    lake = Lake(tmp_path / "lake")
    with serve(routes) as server:
        ingest_images(lake, settings, [request(f"{server.base}/{i}.jpg", i) for i in range(8)], run_id="r")
        most = server.max_in_flight
    assert set(outcomes(lake).values()) == {"ok"}
    assert most == 2  # 8 workers, at most 2 at once on the host (and the cap was reached)


def test_per_host_concurrency_is_validated() -> None:
    assert IngestSettings(per_host_concurrency=2).per_host_concurrency == 2
    with pytest.raises(pydantic.ValidationError):
        IngestSettings(per_host_concurrency=0)


TOML = """
[ingest]
workers = 0
timeout = 5
retries = 0
min_side = 32

[crawl]
contact_url = "https://example.org/about-our-crawler"

[[crawl.sites]]
name = "shop"
platform = "shopify"
base_url = "http://127.0.0.1:{port}"
allow_private_addresses = true
download_delay = 0
"""


def test_the_image_user_agent_carries_the_crawls_contact_url(tmp_path) -> None:
    with serve({"/0.jpg": Route(body=jpeg(120, 120))}) as server:
        config = tmp_path / "lookbench.toml"
        config.write_text(TOML.format(port=server.server_address[1]))
        lake = Lake(tmp_path / "lake")
        lake.append([
            Product(
                product_id="p1", source="shop", platform="shopify", url=f"{server.base}/p1",
                images=[f"{server.base}/0.jpg"], first_seen_at=T0, content_hash="p1", created_at=T0,
            )
        ])  # fmt: skip
        spec = RunSpec(
            flow="refresh", home=str(tmp_path / "lake"), config_path=str(config), as_of=T0,
            version="2026-05", window_start=None, window_end=None,
        )  # fmt: skip
        summary = stages.ingest_shard.fn(spec, pending_image_requests(lake), "0")
        agents = list(server.user_agents)
    assert summary["ok"] == 1
    contact = load_settings(config).crawl.contact_url
    # Both the robots.txt and the image request name the operator the crawler names.
    assert len(agents) == 2 and all(contact in agent for agent in agents), agents
