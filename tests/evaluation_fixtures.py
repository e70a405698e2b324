"""Test releases written with pyarrow, following the release contract (warehouse/release.py).

`make_release(lake, version, rows)` writes `<subset>/{query,gallery}.parquet`,
`noise/gallery.parquet`, a manifest listing the files (sha256, size, rows) and
`LATEST`. Rows are given short-hand (`row(...)`); images are small generated JPEGs
whose colour and stripes make the weight-free baseline's ranking predictable.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from typing import Any

import pyarrow as pa
from PIL import Image, ImageDraw

from lookbench_live.schema.release import RELEASE_SCHEMA, SUBSETS
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes, parquet_bytes

T0 = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)


def image_bytes(colour: tuple[int, int, int], stripes: int = 0, seed: int = 0, size: int = 72) -> bytes:
    image = Image.new("RGB", (size, size), colour)
    draw = ImageDraw.Draw(image)
    for i in range(stripes):
        x = (i * 2 + 1) * size // (2 * stripes + 1)
        draw.rectangle(
            [x, 0, x + size // (4 * stripes + 2), size],
            fill=(255 - colour[0], 255 - colour[1], 255 - colour[2]),
        )
    if seed:
        draw.point([(seed % size, (seed * 7) % size)], fill=(seed % 256, 0, 0))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


def row(
    item: str,
    category: str,
    main: str,
    attrs: dict[str, str] | None = None,
    *,
    colour: tuple[int, int, int] = (200, 30, 30),
    stripes: int = 0,
    seed: int = 0,
    first_seen: dt.datetime = T0,
    published: dt.datetime | None = None,
    source: str = "shop",
) -> dict[str, Any]:
    data = image_bytes(colour, stripes, seed)
    attrs = dict(attrs or {})
    return {
        "image": {"bytes": data, "path": None},
        "raw_image": {"bytes": data, "path": None},
        "category": category,
        "main_attribute": main,
        "other_attributes": ", ".join(v for v in attrs.values() if v != "not_visible"),
        "bbox": None,
        "item_ID": item,
        "task": "test",
        "difficulty": "easy",
        "sha256": hashlib.sha256(data).hexdigest(),
        "raw_sha256": hashlib.sha256(data).hexdigest(),
        "first_seen_at": first_seen,
        "published_at": published,
        "source": source,
        "source_url": f"https://{source}.example/{item}",
        "taxonomy_version": "test-1",
        "annotation_model": "metadata-prior",
        "attributes": [{"key": k, "value": v} for k, v in attrs.items()],
        "provenance": "{}",
    }


def make_release(
    lake: Lake,
    version: str,
    rows: dict[str, list[dict[str, Any]]],
    *,
    latest: bool = True,
    base: str | None = None,
    manifest: bool = True,
) -> str:
    """Write a release; `rows` maps 'subset/split' (e.g. 'aigen_studio/query', 'noise/gallery') to rows."""
    base = base or lake.path("releases", version)
    files: dict[str, dict[str, Any]] = {}
    names = [f"{s}/{split}" for s in SUBSETS for split in ("query", "gallery")] + ["noise/gallery"]
    for name in names:
        table = pa.Table.from_pylist(rows.get(name, []), schema=RELEASE_SCHEMA)
        data = parquet_bytes(table)
        atomic_write_bytes(lake.fs, f"{base}/{name}.parquet", data)
        files[f"{name}.parquet"] = {
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "rows": table.num_rows,
        }
    if manifest:
        body = {"version": version, "files": files, "rows": {k: v["rows"] for k, v in files.items()}}
        atomic_write_bytes(lake.fs, f"{base}/manifest.json", json.dumps(body).encode())
    if latest and manifest:
        atomic_write_bytes(
            lake.fs, lake.path("releases", "LATEST"), json.dumps({"version": version}).encode()
        )
    return base


RED, BLUE, GREEN, YELLOW, GREY = (200, 30, 30), (30, 30, 200), (30, 160, 40), (220, 210, 40), (128, 128, 128)


def sample_rows(shift: int = 0) -> dict[str, list[dict[str, Any]]]:
    """A small release where the baseline retrieves well: each item has its own colour and stripes."""
    palette = [RED, BLUE, GREEN, YELLOW, (160, 60, 200), (20, 180, 180), (240, 140, 20), (90, 50, 20)]
    categories = [("dress", "sequin"), ("coat", "leather"), ("pants", "denim"), ("bag", "leather")]
    out: dict[str, list[dict[str, Any]]] = {}
    n = 0
    for si, subset in enumerate(SUBSETS):
        queries, gallery = [], []
        for j in range(3):
            cat, main = categories[(si + j + shift) % 4]
            colour = palette[(si * 3 + j) % len(palette)]
            stripes = (si + j) % 3
            attrs = {
                "colour": f"c{(si * 3 + j) % 8}",
                "pattern": "striped" if stripes else "solid",
                "length": "not_visible",
            }
            item = f"shop:{subset}-{j}"
            seen = T0 + dt.timedelta(days=10 * j)
            queries.append(
                row(item, cat, main, attrs, colour=colour, stripes=stripes, seed=1 + n, first_seen=seen)
            )
            for g in range(2):
                gallery.append(
                    row(
                        item,
                        cat,
                        main,
                        attrs,
                        colour=colour,
                        stripes=stripes,
                        seed=50 + n * 3 + g,
                        first_seen=seen,
                    )
                )
            n += 1
        out[f"{subset}/query"] = queries
        out[f"{subset}/gallery"] = gallery
    out["noise/gallery"] = [
        row(
            f"noise:{k}",
            "noise data",
            "",
            {},
            colour=(k * 25 % 256, 100, 255 - k * 20 % 256),
            stripes=k % 4,
            seed=200 + k,
        )
        for k in range(8)
    ]
    return out
