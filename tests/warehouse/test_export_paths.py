"""Manifest keys are paths on export (R12): a tampered manifest cannot make the export read or
write outside the release folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import lakefill
import pytest

from lookbench_live.flows.export import ExportError, export_release, safe_relative_path
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import MANIFEST, build_release

VERSION = "v20261201"


@pytest.mark.parametrize(
    "key",
    [
        "../escape.txt",
        "/etc/cron.d/x",
        "a/../../b",
        "a//b",
        "a\\\\b",
        "x\x00y",
        "%2e%2e%2fx",
        ".hidden",
        MANIFEST,
        "",
    ],
)
def test_unsafe_manifest_keys_are_refused(key: str) -> None:
    with pytest.raises(ExportError, match="manifest file key"):
        safe_relative_path(key)


def test_release_file_names_are_safe() -> None:
    assert safe_relative_path("real_studio_flat/query.parquet") == "real_studio_flat/query.parquet"


def test_a_tampered_manifest_exports_nothing(tmp_path: Path) -> None:
    from test_s3_lake import PlainTaxonomy

    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    build_release(lake, version=VERSION, taxonomy=PlainTaxonomy())
    manifest_path = Path(lake.path("releases", VERSION, MANIFEST))
    manifest = json.loads(manifest_path.read_text())
    payload = b"* * * * * root sh -c 'echo pwned'\n"
    (tmp_path / "lake" / "releases" / "escape").write_bytes(payload)  # where "../escape" points
    manifest["files"]["../escape"] = {"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}
    manifest_path.write_text(json.dumps(manifest))
    destination = tmp_path / "out" / "releases"
    with pytest.raises(ExportError, match=r"'\.\./escape' is not a safe relative path"):
        export_release(lake, VERSION, str(destination))
    assert not (tmp_path / "out").exists()
