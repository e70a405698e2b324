"""Assembly across releases: what the crawler writes reserves products, a failed gate uses up
nothing, windows start where the last counted release stopped, the manifest names the gate."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import lakefill
import pyarrow.parquet as pq
from test_release import PlainTaxonomy

from lookbench_live.flows.refresh import previous_window_end
from lookbench_live.schema.release import FILES, NOISE
from lookbench_live.warehouse.assemble import Window
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.query import run_query
from lookbench_live.warehouse.release import (
    build_release,
    read_manifest,
    released_sha256s,
    resolve_version,
    verify_release,
)
from lookbench_live.warehouse.views import lake_view


def _items(lake: Lake, version: str, rel: str) -> set[str]:
    table = pq.read_table(Path(lake.path("releases", version, rel)), columns=["item_ID"])
    return set(table.column("item_ID").to_pylist())


def _shas(lake: Lake, version: str) -> set[str]:
    found: set[str] = set()
    for rel in FILES:
        table = pq.read_table(Path(lake.path("releases", version, rel)), columns=["sha256", "raw_sha256"])
        found |= set(table.column("sha256").to_pylist()) | set(table.column("raw_sha256").to_pylist())
    return found


def test_products_a_look_links_by_url_stay_out_of_studio_queries_and_noise(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    keys = lakefill.fill(lake, look_refs="urls")["products"]  # the crawler states product page URLs
    (look,) = [lk for lk in lake_view(lake).looks.values() if lk.look_id == "look0-0"]
    assert all(ref.startswith("https://") for ref in look.product_refs)
    linked = lake_view(lake).linked_products()
    assert linked == set(keys[:4])  # two looks, two products each, resolved to product keys
    build_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    studio_queries = _items(lake, "v20261201", "real_studio_flat/query.parquet")
    noise = _items(lake, "v20261201", f"{NOISE}/gallery.parquet")
    assert studio_queries and noise
    assert not linked & studio_queries, "a look's product was used as a studio query"
    assert not linked & noise, "a look's product was used as a distractor"
    assert linked & _items(lake, "v20261201", "real_streetlook/gallery.parquet")


def test_a_failed_gate_uses_up_no_image_and_no_window(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    window = Window(lakefill.T0, lakefill.T0 + dt.timedelta(days=30))
    failed = {"passed": False, "reason": "lower bound 0.71 < min_accuracy 0.90"}
    build_release(
        lake, version="v20261201", window=window, taxonomy=PlainTaxonomy(), extra_manifest={"gate": failed}
    )
    assert read_manifest(lake, "v20261201")["gate"] == failed
    assert released_sha256s(lake) == {}  # a failed gate does not count as published
    # The next run starts where the last counted release stopped: none, so the same window.
    assert previous_window_end(lake, "v20270101") is None
    build_release(lake, version="v20270101", window=window, taxonomy=PlainTaxonomy())
    assert verify_release(lake, "v20270101") == []
    assert _shas(lake, "v20270101") == _shas(lake, "v20261201")  # still eligible, all of them
    assert resolve_version(lake, "latest") == "v20270101"
    published = released_sha256s(lake)
    assert set(published.values()) == {"v20270101"}
    assert previous_window_end(lake, "v20270201") == window.end
    gates = run_query(lake, "SELECT DISTINCT version, gate FROM releases ORDER BY version").to_pylist()
    assert gates == [{"version": "v20261201", "gate": "failed"}, {"version": "v20270101", "gate": "none"}]
    # A third release over the same lake finds nothing new: a published image never returns.
    lakefill.fill(lake, seed=4, start=window.end + dt.timedelta(days=1))
    build_release(
        lake,
        version="v20270201",
        window=Window(window.end, window.end + dt.timedelta(days=30)),
        taxonomy=PlainTaxonomy(),
    )
    assert not _shas(lake, "v20270201") & _shas(lake, "v20270101")
    manifest = json.loads(Path(lake.path("releases", "v20270201", "manifest.json")).read_text())
    assert manifest["window"]["start"] == window.end.isoformat()


def test_a_release_index_cached_under_another_hash_method_is_rebuilt(tmp_path: Path) -> None:
    """Hashes of two methods do not compare: a cache from an older method must not silently drop
    that release's images out of the near-duplicate check (they would be skipped as foreign)."""
    from lookbench_live.schema.hashing import HASH_METHOD
    from lookbench_live.warehouse import released

    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    build_release(lake, version="v20261201", taxonomy=PlainTaxonomy())
    base = lake.path("releases", "v20261201")
    versions = [("v20261201", base, read_manifest(lake, "v20261201"))]
    fresh = released.released_index(lake, versions)
    assert fresh.hashes, "the committed release's images are in the near check"
    cache = Path(released.index_path(lake, "v20261201"))
    table = pq.read_table(cache)
    n = table.num_rows
    old = table.set_column(
        table.schema.get_field_index("method"), "method", [["an-older-method"] * n]
    ).replace_schema_metadata({**table.schema.metadata, b"hash_method": b"an-older-method"})
    pq.write_table(old, cache)
    again = released.released_index(lake, versions)
    # Rebuilt from the release's own bytes (the first index took the lake's hashes of the originals).
    assert set(again.hashes) == set(fresh.hashes)
    assert pq.read_table(cache).schema.metadata[b"hash_method"] == HASH_METHOD.encode()
