"""The dataset card and Croissant file: every column described, terms that fit scraped retail photos."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lookbench_live.warehouse.assemble import RELEASE_SCHEMA
from lookbench_live.warehouse.card import croissant_json, dataset_card

INFO = {
    "version": "v20261201",
    "window": {"start": "2026-11-01", "end": "2026-12-01", "rule": "first_seen_at in [start, end)"},
    "taxonomy_version": "2026.12.0",
    "annotation_models": ["Qwen/Qwen2.5-VL-72B-Instruct"],
    "annotation_sources": ["vlm"],
    "generation_models": ["stabilityai/stable-diffusion-xl-base-1.0"],
    "generation_tiny_local": False,
    "rows": {"real_studio_flat/query.parquet": 3},
    "contact": "mailto:takedown@example.org",
}


def _files() -> dict[str, dict[str, str]]:
    subsets = ("real_studio_flat", "aigen_studio", "real_streetlook", "aigen_streetlook")
    rels = [f"{s}/{split}.parquet" for s in subsets for split in ("query", "gallery")] + [
        "noise/gallery.parquet"
    ]
    return {rel: {"sha256": "0" * 64} for rel in rels}


def test_card_describes_every_column_and_carries_research_terms() -> None:
    card = dataset_card(INFO)
    front = yaml.safe_load(card.split("---")[1])
    assert front["license"] == "other" and front["license_name"] == "lookbench-live-research-terms"
    assert "apache" not in card.lower()
    body = card.split("---", 2)[2]
    table = [line for line in body.splitlines() if line.startswith("| `")]
    assert [line.split("`")[1] for line in table] == RELEASE_SCHEMA.names  # every column, in order
    assert all(line.count(" | ") == 2 for line in table), "a cell breaks the table"  # `a\|b` is escaped
    assert "[x0, y0, x1, y1]" in body and "first_seen_at" in body
    assert "Research use only" in body and "Do not\nredistribute" not in body
    assert "redistribute the images" in body and "mailto:takedown@example.org" in body
    assert "## Takedown" in body
    # Without a contact the project's page is given, never nothing.
    assert "https://github.com/lookbench-live/lookbench-live" in dataset_card({**INFO, "contact": None})


def test_croissant_describes_every_column_of_every_file() -> None:
    doc = json.loads(croissant_json(INFO, _files()))
    assert "apache" not in json.dumps(doc).lower()
    assert doc["license"].startswith("lookbench-live-research-terms")
    assert "mailto:takedown@example.org" in doc["usageInfo"] and "Research use only" in doc["usageInfo"]
    assert doc["rai:dataCollection"] and doc["rai:personalSensitiveInformation"]
    assert len(doc["recordSet"]) == len(doc["distribution"]) == 9
    for record_set in doc["recordSet"]:
        fields = {f["name"]: f for f in record_set["field"]}
        assert list(fields) == RELEASE_SCHEMA.names
        assert all(f["description"] for f in fields.values())
        assert fields["image"]["dataType"] == "sc:ImageObject"
        assert fields["image"]["source"]["transform"] == {"jsonPath": "bytes"}
        assert fields["bbox"]["dataType"] == "sc:Integer" and fields["bbox"]["repeated"] is True
        assert [s["name"] for s in fields["attributes"]["subField"]] == ["key", "value"]
        assert fields["first_seen_at"]["dataType"] == "sc:Date"


def _mlcroissant() -> str | None:
    local = Path(sys.executable).parent / "mlcroissant"
    return str(local) if local.exists() else shutil.which("mlcroissant")


def test_a_built_release_croissant_still_validates(tmp_path: Path) -> None:
    tool = _mlcroissant()
    if tool is None:
        pytest.skip("mlcroissant is not installed")
    import lakefill
    from test_release import build

    from lookbench_live.warehouse.lake import Lake

    lake = Lake(tmp_path / "lake")
    lakefill.fill(lake)
    build(lake)
    path = Path(lake.path("releases", "v20261201", "croissant.json"))
    proc = subprocess.run(
        [tool, "validate", "--jsonld", str(path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "error" not in proc.stderr.lower().replace("0 error", ""), proc.stderr[-2000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-2000:]


def test_the_configured_takedown_contact_reaches_a_built_releases_card(tmp_path: Path) -> None:
    """13 §4: `[release] contact` (else `[crawl] contact_url`) is printed by the card and the
    Croissant terms of a release built by the CLI; a contact that would break them is refused."""
    import lakefill
    from typer.testing import CliRunner

    from lookbench_live.cli import app
    from lookbench_live.config import ConfigError, load_settings
    from lookbench_live.warehouse.lake import Lake

    home = tmp_path / "lake"
    lakefill.fill(Lake(home))
    config = tmp_path / "c.toml"
    config.write_text(
        '[crawl]\ncontact_url = "https://crawler.example/about"\n[release]\ncontact = "takedown@shop-research.example"\n'
    )
    assert load_settings(config).contact == "takedown@shop-research.example"
    result = CliRunner().invoke(
        app, ["release", "build", "--version", "v20261201", "--home", str(home), "--config", str(config)]
    )
    assert result.exit_code == 0, result.output
    base = home / "releases" / "v20261201"
    card = (base / "README.md").read_text()
    croissant = json.loads((base / "croissant.json").read_text())
    assert (
        "takedown@shop-research.example" in card
        and "takedown@shop-research.example" in croissant["usageInfo"]
    )
    assert "github.com/lookbench-live" not in croissant["usageInfo"]
    assert json.loads((base / "manifest.json").read_text())["contact"] == "takedown@shop-research.example"

    fallback = tmp_path / "f.toml"
    fallback.write_text('[crawl]\ncontact_url = "https://crawler.example/about"\n')
    assert load_settings(fallback).contact == "https://crawler.example/about"
    for bad in ('"x"', '"https://a.example/\\n---\\nlicense: mit"', '"<script>@x.example"'):
        broken = tmp_path / "b.toml"
        broken.write_text(f"[release]\ncontact = {bad}\n")
        with pytest.raises(ConfigError, match=r"release\.contact"):
            load_settings(broken)


def test_card_states_the_box_rules_with_every_box_source() -> None:
    """Issue 22 §3: a reader learns what located each box; a prior-mode release has no guessed boxes."""
    for info in (INFO, {**INFO, "annotation_sources": ["metadata_prior"]}):
        body = dataset_card(info).split("---", 2)[2]
        rules = body.split("## Boxes", 1)[1].split("## Terms of use", 1)[0]
        assert "comes from what located the item" in rules and "EXIF orientation" in rules
        assert all(f"`{source}`" in rules for source in ("hotspot", "vlm", "layout", "product_photo"))
        assert "box_not_located" in rules and "band" not in rules
