"""A store configured by hand, end to end (issue 13 §2, "Done when").

What a new user does: write a TOML with three `[[crawl.sites]]` (schema_org, shopify,
woocommerce) on one loopback host with `allow_private_addresses = true`, and run
`lookbench-live refresh --config` on it. The products and their images must reach the
release's real subsets: before the fix every image was refused as `blocked_address` and the
run still exited 0 with empty real subsets. tests/ingest/test_ingest_sites.py checks the per-site
allowance in detail; this one checks the whole command a user runs.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lookbench_live.sample_store.server import SampleStore
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import read_manifest, resolve_version, verify_release

pytestmark = pytest.mark.slow
PORT = 48795  # unique to this module

TOML = """
# Written as a user would: three platforms of one shop and its looks on one (private) host.
[[crawl.sites]]
name = "shop-schema"
platform = "schema_org"
base_url = "{base}/schema"
allow_private_addresses = true
download_delay = 0.0

[[crawl.sites]]
name = "shop-shopify"
platform = "shopify"
base_url = "{base}/shopify"
collections = ["women"]
allow_private_addresses = true
download_delay = 0.0

[[crawl.sites]]
name = "shop-woo"
platform = "woocommerce"
base_url = "{base}/woo"
allow_private_addresses = true
download_delay = 0.0

# A look source: without one no site yields RealStreetLook, and refresh refuses the
# configuration before crawling (flows/preflight.py).
[[crawl.sites]]
name = "shop-looks"
platform = "looks"
base_url = "{base}/looks"
look_paths = ["/looks/"]
allow_private_addresses = true
download_delay = 0.0
"""


def test_a_hand_written_toml_store_gets_its_images_into_a_release(tmp_path: Path, cli: str) -> None:
    today = dt.datetime.now(dt.UTC).replace(microsecond=0)
    home = tmp_path / "lake"
    config = tmp_path / "lookbench.toml"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    with SampleStore(port=PORT, clock=today) as store:
        config.write_text(TOML.format(base=store.base_url.rstrip("/")))
        run = subprocess.run(
            [cli, "refresh", "--config", str(config), "--home", str(home)],
            capture_output=True, text=True, timeout=1500, env=env,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lake = Lake(home)
    images = lake.read("images").to_pylist()
    mine = [r for r in images if str(r["owner_id"]).startswith("shop-")]
    assert mine, "no image of the configured sites was recorded"
    assert not [r for r in mine if r["rejection_reason"] == "blocked_address"]
    sources = {r["owner_id"].split(":")[0] for r in mine if r["status"] == "ok"}
    assert sources >= {"shop-schema", "shop-shopify", "shop-woo"}
    version = resolve_version(lake, "latest")
    assert verify_release(lake, version) == []
    files = read_manifest(lake, version)["files"]
    for rel in ("real_studio_flat/query.parquet", "real_studio_flat/gallery.parquet"):
        assert files[rel]["rows"] > 0, f"{rel} is empty"
    gallery = pq.read_table(home / "releases" / version / "real_studio_flat" / "gallery.parquet")
    assert gallery.num_rows == files["real_studio_flat/gallery.parquet"]["rows"]
