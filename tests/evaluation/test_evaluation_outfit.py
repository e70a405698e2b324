"""Outfit-level retrieval (issue 23 §2): `evaluate --json` reports it for the StreetLook subsets,
the lake stores it, and plain numpy over the same embeddings gives the same numbers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from evaluation_fixtures import T0, make_release
from street_fixtures import V, embeddings_file, street_rows

from lookbench_live.evaluation.contamination import evaluate_range
from lookbench_live.evaluation.evaluate import evaluate_release
from lookbench_live.evaluation.metrics import DEFAULT_KS
from lookbench_live.evaluation.outfit import OUTFIT_SUBSETS


def recompute(base: Path, subset: str, vectors: dict[str, np.ndarray], keep=lambda r: True) -> dict[str, Any]:
    """Outfit recall from scratch: cosine top-K over gallery + noise (ties to the lower row), a
    crop's hit per family, a look (same raw_sha256) a hit when all its crops are."""
    queries = [r for r in pq.read_table(base / subset / "query.parquet").to_pylist() if keep(r)]
    corpus = pq.read_table(base / subset / "gallery.parquet").to_pylist()
    corpus += pq.read_table(base / "noise" / "gallery.parquet").to_pylist()

    def unit(sha: str) -> np.ndarray:
        v = vectors[sha].astype(np.float64)
        return v / np.linalg.norm(v)

    sims = np.stack([unit(q["sha256"]) for q in queries]) @ np.stack([unit(c["sha256"]) for c in corpus]).T
    attrs = [sorted((a["key"], a["value"]) for a in r["attributes"]) for r in [*queries, *corpus]]
    q_attrs, c_attrs = attrs[: len(queries)], attrs[len(queries) :]
    same = {
        "coarse": lambda q, c: queries[q]["category"] == corpus[c]["category"],
        "fine": lambda q, c: (
            same["coarse"](q, c) and queries[q]["main_attribute"] == corpus[c]["main_attribute"]
        ),
        "strict": lambda q, c: same["coarse"](q, c) and q_attrs[q] == c_attrs[c],
    }
    looks = sorted({q["raw_sha256"] for q in queries})
    out: dict[str, Any] = {"outfit_looks": len(looks), "outfit_crops_per_look": len(queries) / len(looks)}
    for family, test in same.items():
        for k in DEFAULT_KS:
            crop_hit = []
            for q in range(len(queries)):
                order = np.lexsort((np.arange(len(corpus)), -sims[q]))[:k]
                crop_hit.append(any(test(q, int(c)) for c in order))
            look_hit = [
                all(h for h, qr in zip(crop_hit, queries, strict=True) if qr["raw_sha256"] == look)
                for look in looks
            ]
            out[f"outfit_{family}_recall@{k}"] = 100.0 * sum(look_hit) / len(looks)
    return out


def test_outfit_recall_is_reported_stored_and_recomputes(cli: str, lake, tmp_path: Path) -> None:
    base = Path(make_release(lake, V, street_rows()))
    file, vectors = embeddings_file(base, tmp_path / "emb.parquet")
    out = subprocess.run(
        [cli, "evaluate", V, "--embeddings", file, "--model", "outfit-test", "--json", "--home", lake.home],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    keys = [f"outfit_{f}_recall@{k}" for f in ("fine", "coarse", "strict") for k in DEFAULT_KS]
    expected_shape = {"real_streetlook": (3, 2.0), "aigen_streetlook": (2, 1.5)}
    for subset in OUTFIT_SUBSETS:
        entry = result["subsets"][subset]
        ours = recompute(base, subset, vectors)
        assert (entry["outfit_looks"], entry["outfit_crops_per_look"]) == expected_shape[subset]
        assert isinstance(entry["outfit_looks"], int)
        for key in keys:
            assert entry[key] == pytest.approx(ours[key], abs=1e-3), (subset, key)
    street = result["subsets"]["real_streetlook"]
    # A case where the rules matter: some looks hit and some miss, "every crop" is stricter than
    # the crops' own mean, and the three families differ.
    assert 0 < street["outfit_fine_recall@5"] < 100
    assert street["outfit_fine_recall@1"] < street["fine_recall@1"]
    assert (
        street["outfit_strict_recall@5"] < street["outfit_fine_recall@5"] < street["outfit_coarse_recall@5"]
    )
    for name in ("real_studio_flat", "aigen_studio"):
        assert not [k for k in result["subsets"][name] if k.startswith("outfit_")]
    assert not [k for k in result["overall"] if k.startswith("outfit_")]

    # Stored where every metric is: the `evaluations` rows of the two subsets, as text.
    stored = {r.subset: r.metrics for r in lake.records("evaluations")}
    for subset in OUTFIT_SUBSETS:
        entry = result["subsets"][subset]
        assert stored[subset]["outfit_looks"] == str(entry["outfit_looks"])
        assert float(stored[subset]["outfit_crops_per_look"]) == entry["outfit_crops_per_look"]
        for key in keys:
            assert float(stored[subset][key]) == pytest.approx(entry[key], abs=1e-4)
    assert not [k for k in stored["real_studio_flat"] if k.startswith("outfit_")]

    # `--after` forms looks from the queries it keeps: only the newer photo is left.
    later = evaluate_release(lake, V, embeddings=file, after=T0.date(), write=False)["subsets"]
    assert later["real_streetlook"]["outfit_looks"] == 1
    newer = recompute(base, "real_streetlook", vectors, keep=lambda r: r["first_seen_at"] > T0)
    for key in keys:
        assert later["real_streetlook"][key] == pytest.approx(newer[key], abs=1e-3), key
    assert later["aigen_streetlook"]["outfit_looks"] == 0
    assert later["aigen_streetlook"]["outfit_fine_recall@1"] is None
    # `evaluate --releases … --after` gives each release the same outfit keys.
    ranged = evaluate_range(lake, [V], embeddings=file, after=T0.date())["releases"][0]["subsets"]
    for subset in OUTFIT_SUBSETS:
        assert {k: v for k, v in ranged[subset].items() if k.startswith("outfit_")} == {
            k: v for k, v in later[subset].items() if k.startswith("outfit_")
        }
