"""A release whose StreetLook queries are crops of shared photos, and embeddings for it with
some signal (tests of outfit-level retrieval and of the look-bench glue)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from evaluation_fixtures import T0, image_bytes, row, sample_rows

V = "v20261101"
LATE = T0 + dt.timedelta(days=30)
# Per StreetLook subset, its looks: the (category, main attribute) of each crop of one photo.
LOOKS = {
    "real_streetlook": [
        [("dress", "sequin"), ("coat", "leather"), ("bag", "leather")],
        [("pants", "denim"), ("dress", "lace")],
        [("coat", "wool")],
    ],
    "aigen_streetlook": [[("bag", "leather"), ("shoe", "suede")], [("dress", "sequin")]],
}


def street_rows() -> dict[str, list[dict[str, Any]]]:
    """The sample release with StreetLook queries cut from shared photos. Each crop's item has two
    gallery rows; a near twin (same category and main attribute, another colour) makes fine and
    strict differ, another category's row with the same attribute makes coarse differ."""
    rows = sample_rows()
    n = 0
    for subset, looks in LOOKS.items():
        queries, gallery = [], []
        for li, look in enumerate(looks):
            photo = image_bytes((10 * li + 40, 90, 140), stripes=li + 1, seed=300 + li, size=96)
            late = subset == "real_streetlook" and li == len(looks) - 1  # the last look is newer
            for ci, (cat, main) in enumerate(look):
                n += 1
                attrs = {"colour": f"c{n % 5}", "pattern": "solid"}
                item = f"shop:{subset}-{li}-{ci}"
                crop = row(item, cat, main, attrs, seed=400 + n, first_seen=LATE if late else T0)
                crop["raw_image"] = {"bytes": photo, "path": None}
                crop["raw_sha256"] = hashlib.sha256(photo).hexdigest()
                queries.append(crop)
                gallery += [row(item, cat, main, attrs, seed=500 + 4 * n + g) for g in range(2)]
                gallery.append(row(f"{item}-twin", cat, main, {**attrs, "colour": "other"}, seed=502 + 4 * n))
                gallery.append(row(f"{item}-other", "scarf", main, attrs, seed=503 + 4 * n))
        rows[f"{subset}/query"] = queries
        rows[f"{subset}/gallery"] = gallery
    return rows


def embeddings_file(
    base: Path, path: Path, seed: int = 1, query_spread: float = 2.0, near_spread: float = 0.5
) -> tuple[str, dict[str, np.ndarray]]:
    """Embeddings for every image: a query near its item's centre (with enough noise that some
    crops miss), gallery rows of an item close to it, everything else random."""
    rng = np.random.default_rng(seed)
    centre: dict[str, np.ndarray] = {}
    vectors: dict[str, np.ndarray] = {}
    for rel in sorted(p.relative_to(base).as_posix() for p in base.rglob("*.parquet")):
        for r in pq.read_table(base / rel, columns=["sha256", "item_ID"]).to_pylist():
            item = r["item_ID"]
            if item.endswith(("-twin", "-other")):  # near the item they imitate, a little further
                spread, item = near_spread, item.rsplit("-", 1)[0]
            else:
                spread = query_spread if rel.endswith("query.parquet") else 0.3
            c = centre.setdefault(item, rng.standard_normal(16))
            vectors[r["sha256"]] = (c + spread * rng.standard_normal(16)).astype(np.float32)
    shas = sorted(vectors)
    pq.write_table(
        pa.table(
            {
                "sha256": shas,
                "embedding": pa.array([vectors[s].tolist() for s in shas], pa.list_(pa.float32())),
            }
        ),
        path,
    )
    return str(path), vectors
