"""Crawls across runs (issue 25): a host that was unreachable during one run is crawled again by
the rerun instead of being trusted as a finished shard."""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

import pytest

from lookbench_live.config import SiteSettings, load_settings
from lookbench_live.flows import ledger, stages
from lookbench_live.flows.runtime import RunSpec
from lookbench_live.scrapers.sample_store import SampleStore, sample_sites
from lookbench_live.warehouse.lake import Lake


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(tmp_path: Path, site: SiteSettings) -> Path:
    values = {
        **site.model_dump(exclude_defaults=True),
        "allow_private_addresses": True,
        "download_delay": 0.0,
    }
    lines = ["[crawl]", "autothrottle = false", "retry_times = 0", "", "[[crawl.sites]]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path = tmp_path / "lookbench.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_site_unreachable_during_one_run_is_crawled_again_by_the_rerun(tmp_path: Path) -> None:
    from prefect import flow

    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    port = _free_port()
    # The site's address while nothing listens there (the store stopped, the host down).
    shop = next(s for s in sample_sites(f"http://127.0.0.1:{port}") if s.name == "sample-shopify")
    config = _config(tmp_path, shop.model_copy(update={"collections": []}))
    settings = load_settings(config)
    spec = RunSpec(
        flow="refresh", home=str(tmp_path / "lake"), config_path=str(config), as_of=today.isoformat(),
        version=f"v{today:%Y%m%d}", window_start=None, window_end=(today + dt.timedelta(days=1)).isoformat(),
    )  # fmt: skip

    @flow(name="crawl-unreachable-then-back")
    def crawl() -> list[dict]:
        return stages.crawl_all(spec, settings)

    with pytest.raises(stages.CrawlError, match="host unreachable, the rerun retries it"):
        crawl()
    lake = Lake(spec.home)
    assert not ledger.is_done(lake, spec.run_key, "crawl", "sample-shopify")  # no completion marker
    with SampleStore(port=port, clock=today):
        (outcome,) = crawl()
    assert outcome["status"] == "ok" and outcome["products"] > 0 and "skipped" not in outcome, outcome
    assert ledger.is_done(lake, spec.run_key, "crawl", "sample-shopify")
    assert {r["source"] for r in lake.read("products").to_pylist()} == {"sample-shopify"}
