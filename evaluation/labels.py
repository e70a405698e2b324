"""Label codes from release rows: one shared vocabulary across query, gallery and noise."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live.evaluation.metrics import ABSENT, NOT_VISIBLE, LabelCodes

NOT_VISIBLE_VALUE = "not_visible"  # the taxonomy's value for "cannot be seen in this image"
_SEP = "\x1f"


def _codes(arrays: list[pa.Array]) -> np.ndarray:
    combined = (
        pa.chunked_array(arrays, type=pa.string()).combine_chunks() if arrays else pa.array([], pa.string())
    )
    combined = pc.fill_null(combined, "")
    encoded = pc.dictionary_encode(combined)
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def encode_labels(tables: Sequence[pa.Table]) -> list[LabelCodes]:
    """Label codes for each table (columns `category`, `main_attribute`, `item_ID`, `attributes`).

    Codes are comparable across the returned sets. `attributes` is the release's
    `list<struct<key, value>>` (group -> value); a missing column means no attributes.
    """
    sizes = [t.num_rows for t in tables]

    def column(name: str) -> list[pa.Array]:
        out = []
        for t in tables:
            if name in t.column_names:
                out.append(pc.cast(t.column(name).combine_chunks(), pa.string()))
            else:
                out.append(pa.nulls(t.num_rows, pa.string()))
        return out

    categories = column("category")
    mains = column("main_attribute")
    category = _codes(categories)
    fine = _codes(
        [
            pc.binary_join_element_wise(pc.fill_null(c, ""), pc.fill_null(m, ""), _SEP)
            for c, m in zip(categories, mains, strict=True)
        ]
    )
    item = _codes(column("item_ID"))

    rows: list[dict[str, str]] = []
    for t in tables:
        if "attributes" in t.column_names:
            rows.extend(
                {kv["key"]: kv["value"] for kv in (v or [])} for v in t.column("attributes").to_pylist()
            )
        else:
            rows.extend({} for _ in range(t.num_rows))
    groups = sorted({g for r in rows for g in r})
    group_col = {g: i for i, g in enumerate(groups)}
    value_code: dict[str, int] = {}
    attrs = np.full((len(rows), len(groups)), ABSENT, np.int32)
    strict_keys: list[str] = []
    cat_text = [c for arr in categories for c in pc.fill_null(arr, "").to_pylist()]
    for i, r in enumerate(rows):
        for g, v in r.items():
            attrs[i, group_col[g]] = (
                NOT_VISIBLE if v == NOT_VISIBLE_VALUE else value_code.setdefault(v, len(value_code))
            )
        strict_keys.append(cat_text[i] + _SEP + _SEP.join(f"{g}={r[g]}" for g in sorted(r)))
    strict = _codes([pa.array(strict_keys, pa.string())])

    out: list[LabelCodes] = []
    start = 0
    for n in sizes:
        sl = slice(start, start + n)
        out.append(LabelCodes(category[sl], fine[sl], strict[sl], item[sl], attrs[sl]))
        start += n
    return out
