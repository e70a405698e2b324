"""The Hugging Face features a release declares (issue 23 §1): `image` and `raw_image` load as
images untouched, the declaration matches `datasets`' own, and `release verify` checks it without
failing releases written before it existed."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from evaluation_fixtures import make_release, sample_rows

from lookbench_live.schema.release import HF_METADATA_KEY, IMAGE_COLUMNS, RELEASE_SCHEMA, hf_yaml_features
from lookbench_live.warehouse.card import dataset_card
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import verify_release

OLD_LAKE = Path(__file__).parents[1] / "fixtures" / "lake-before-freshness.tar.gz"


def test_declared_features_are_what_datasets_reads_and_writes() -> None:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features.from_arrow_schema(RELEASE_SCHEMA)
    # Every column is described (its feature comes from the metadata), the images as Image.
    assert [c for c in RELEASE_SCHEMA.names if isinstance(features[c], datasets.Image)] == list(IMAGE_COLUMNS)
    assert features.arrow_schema.equals(RELEASE_SCHEMA, check_metadata=True)  # the same JSON, byte for byte
    # The card's YAML is datasets' own form of the same features, for every config.
    assert hf_yaml_features(RELEASE_SCHEMA) == features._to_yaml_list()
    info = {
        "version": "v20261201",
        "window": {"start": None, "end": "2026-12-04T00:00:00+00:00", "rule": "r"},
        "taxonomy_version": "t",
        "annotation_models": [],
        "annotation_sources": [],
        "generation_models": [],
        "generation_tiny_local": False,
        "rows": {},
    }
    card = dataset_card(info)
    front = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in front["dataset_info"]] == [c["config_name"] for c in front["configs"]]
    for config in front["dataset_info"]:
        assert datasets.Features._from_yaml_list(config["features"]) == features
    # An open window is said in words, never printed as `None`.
    assert "None" not in card and "before 2026-12-04" in card
    started = dataset_card({**info, "window": {**info["window"], "start": "2026-11-03T00:00:00+00:00"}})
    assert "from 2026-11-03 (inclusive) to 2026-12-04 (exclusive)" in started


def _rewrite(base: Path, rel: str, table: pa.Table) -> None:
    """Rewrite one file of the release with `table` and make the manifest agree (a writer's bug,
    not tampering: the checksums match)."""
    sink = io.BytesIO()
    pq.write_table(table, sink)
    data = sink.getvalue()
    (base / rel).write_bytes(data)
    manifest = json.loads((base / "manifest.json").read_text())
    manifest["files"][rel].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    (base / "manifest.json").write_text(json.dumps(manifest))


def test_verify_checks_the_declared_features_and_passes_older_releases(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    base = Path(make_release(lake, "v20261201", sample_rows()))
    rel = "real_streetlook/query.parquet"
    assert HF_METADATA_KEY in pq.read_schema(base / rel).metadata
    assert verify_release(lake, "v20261201") == []
    table = pq.read_table(base / rel)
    # Written before the declaration: no `huggingface` key at all is sound.
    _rewrite(base, rel, table.replace_schema_metadata(None))
    assert verify_release(lake, "v20261201") == []
    # A declaration that calls the images plain structs, or misses a column, is a fault.
    stale = json.loads(RELEASE_SCHEMA.metadata[HF_METADATA_KEY])
    stale["info"]["features"]["image"] = {
        "bytes": {"dtype": "binary", "_type": "Value"},
        "path": {"dtype": "string", "_type": "Value"},
    }
    _rewrite(base, rel, table.replace_schema_metadata({HF_METADATA_KEY: json.dumps(stale)}))
    assert verify_release(lake, "v20261201") == [
        f"{rel}: its Hugging Face features metadata disagrees with its column types"
    ]
    _rewrite(base, rel, table.drop_columns(["provenance"]))
    assert verify_release(lake, "v20261201") == [
        f"{rel}: its Hugging Face features metadata does not list its columns in order"
    ]
    # Tampering is still caught by the checksums, declaration or not.
    data = bytearray((base / rel).read_bytes())
    data[len(data) // 2] ^= 0x01
    (base / rel).write_bytes(bytes(data))
    assert any("was altered" in p for p in verify_release(lake, "v20261201"))


def test_a_release_written_before_the_declaration_still_verifies(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    home.mkdir()
    with tarfile.open(OLD_LAKE) as tar:
        tar.extractall(home, filter="data")
    lake = Lake(home)
    query = home / "releases" / "v20261107" / "real_streetlook" / "query.parquet"
    assert HF_METADATA_KEY not in (pq.read_schema(query).metadata or {})
    assert verify_release(lake, "v20261107") == []
