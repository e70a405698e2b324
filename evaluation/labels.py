"""Label codes from release rows: one shared vocabulary across query, gallery and noise."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live.evaluation.metrics import ABSENT, NOT_VISIBLE, LabelCodes

NOT_VISIBLE_VALUE = "not_visible"  # the taxonomy's value for "cannot be seen in this image"
MULTI_SEPARATOR = "|"  # joins a multi-valued group's values in the release ("red|white")
_SEP = "\x1f"


def canonical_value(value: str | None) -> str | None:
    """A group's value with a multi-valued answer's parts sorted: "white|red" -> "red|white"."""
    if value is None or MULTI_SEPARATOR not in value:
        return value
    return MULTI_SEPARATOR.join(sorted({p.strip() for p in value.split(MULTI_SEPARATOR) if p.strip()}))


def overlap_table(values: Sequence[str | None]) -> np.ndarray | None:
    """overlap[i, j]: how many parts value strings i and j share (the diagonal: each one's number
    of parts); None when no value is multi-valued (then a code is one value)."""
    if not any(v is not None and MULTI_SEPARATOR in v for v in values):
        return None
    parts = [set(v.split(MULTI_SEPARATOR)) if v is not None else {None} for v in values]
    table = np.zeros((len(values), len(values)), np.int8)
    for i, left in enumerate(parts):
        for j in range(i, len(values)):
            table[i, j] = table[j, i] = len(left & parts[j])
    return table


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
    A multi-valued value ("white|red") is coded by its sorted value set, and the returned
    codes carry an `overlap` table so that it shares with "red" (docs/evaluation.md).
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

    rows: list[dict[str, str | None]] = []
    for t in tables:
        if "attributes" in t.column_names:
            rows.extend(
                {kv["key"]: canonical_value(kv["value"]) for kv in (v or [])}
                for v in t.column("attributes").to_pylist()
            )
        else:
            rows.extend({} for _ in range(t.num_rows))
    groups = sorted({g for r in rows for g in r})
    group_col = {g: i for i, g in enumerate(groups)}
    value_code: dict[str | None, int] = {}
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
    overlap = overlap_table(list(value_code))  # value_code is in code order

    out: list[LabelCodes] = []
    start = 0
    for n in sizes:
        sl = slice(start, start + n)
        out.append(LabelCodes(category[sl], fine[sl], strict[sl], item[sl], attrs[sl], overlap))
        start += n
    return out
