"""The release format, defined once: subsets, tasks, the Arrow schema and the file list.

The writer (`warehouse/assemble.py`, `warehouse/release.py`), the dataset card and Croissant
file (`warehouse/card.py`) and the evaluator (`evaluation/release_data.py`) read these names;
nothing else defines them. See docs/release.md for what each column means.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable

import pyarrow as pa

SUBSETS = ("real_studio_flat", "aigen_studio", "real_streetlook", "aigen_streetlook")
NOISE = "noise"  # gallery only: distractors shared by every subset
NOISE_CATEGORY = "noise data"  # the published category of every distractor row
SPLITS = ("query", "gallery")

# The nine LookBench columns, in this order, first in every file.
PUBLISHED_COLUMNS = (
    "image",
    "raw_image",
    "category",
    "main_attribute",
    "other_attributes",
    "bbox",
    "item_ID",
    "task",
    "difficulty",
)
IMAGE_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
KV = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
TS = pa.timestamp("us", tz="UTC")
_COLUMNS = pa.schema(
    [
        ("image", IMAGE_STRUCT),
        ("raw_image", IMAGE_STRUCT),
        ("category", pa.string()),
        ("main_attribute", pa.string()),
        ("other_attributes", pa.string()),
        ("bbox", pa.list_(pa.int32())),
        ("item_ID", pa.string()),
        ("task", pa.string()),
        ("difficulty", pa.string()),
        ("sha256", pa.string()),
        ("raw_sha256", pa.string()),
        ("bbox_source", pa.string()),  # hotspot | vlm | layout | product_photo; null with bbox null
        ("first_seen_at", TS),
        ("published_at", TS),
        ("freshness_evidence", pa.string()),  # warehouse/freshness.py: what dates the row
        ("evidence_at", TS),
        ("source", pa.string()),
        ("source_url", pa.string()),
        ("taxonomy_version", pa.string()),
        ("annotation_model", pa.string()),
        ("attributes", KV),
        ("provenance", pa.string()),
        ("difficulty_estimate", pa.string()),
        ("taxonomy_category", pa.string()),
        # Groups where the VLM disagreed with the metadata prior (`warehouse/labels.py`).
        ("label_disputes", pa.list_(pa.string())),
    ]
)
# The columns Hugging Face `datasets` decodes as images (PIL) when it loads a release untouched,
# and the schema metadata key `datasets` writes and reads its features under.
IMAGE_COLUMNS = ("image", "raw_image")
HF_METADATA_KEY = b"huggingface"


def _hf_feature(kind: pa.DataType) -> dict:
    """A column's `datasets` feature, as `Features.to_dict()` writes it (datasets 4/5)."""
    if pa.types.is_list(kind):
        return {"feature": _hf_feature(kind.value_type), "_type": "List"}
    if pa.types.is_struct(kind):
        return {f.name: _hf_feature(f.type) for f in kind}
    return {"dtype": str(kind), "_type": "Value"}  # string, int32, timestamp[us, tz=UTC]


def hf_features(schema: pa.Schema) -> dict[str, dict]:
    """Every column of `schema`, in order, as a Hugging Face feature; `IMAGE_COLUMNS` are `Image`.

    `datasets` takes a column's feature from the file's `huggingface` metadata only when every
    field matches the file's own (`Features.from_arrow_schema`), so every column is described."""
    return {f.name: {"_type": "Image"} if f.name in IMAGE_COLUMNS else _hf_feature(f.type) for f in schema}


def _hf_yaml_type(kind: pa.DataType) -> dict:
    """A column's type as the card's YAML writes it (`Features._to_yaml_list`): lists of values or
    of structs, the only nesting a release has."""
    if pa.types.is_list(kind):
        inner = kind.value_type
        if pa.types.is_struct(inner):
            return {"list": [{"name": f.name, **_hf_yaml_type(f.type)} for f in inner]}
        return {"list": str(inner)}
    return {"dtype": str(kind)}


def hf_yaml_features(schema: pa.Schema) -> list[dict]:
    """The same features in the dataset card's YAML form (`dataset_info.features`)."""
    return [
        {"name": f.name, "dtype": "image"}
        if f.name in IMAGE_COLUMNS
        else {"name": f.name, **_hf_yaml_type(f.type)}
        for f in schema
    ]


def features_fault(schema: pa.Schema) -> str | None:
    """What is wrong with a file schema's `huggingface` metadata, or None.

    A file without it (a release written before it was declared) is sound; one with it must
    describe exactly the file's own columns, in order, with `IMAGE_COLUMNS` as images: anything
    else would make `datasets` drop or mistype the declaration."""
    stored = (schema.metadata or {}).get(HF_METADATA_KEY)
    if stored is None:
        return None
    try:
        features = json.loads(stored)["info"]["features"]
    except (ValueError, KeyError, TypeError):
        return "its Hugging Face features metadata cannot be read"
    if not isinstance(features, dict) or list(features) != schema.names:
        return "its Hugging Face features metadata does not list its columns in order"
    if features != hf_features(schema):
        return "its Hugging Face features metadata disagrees with its column types"
    return None


# The schema every release file is written with. Its `huggingface` metadata declares `image` and
# `raw_image` as Image features, so `load_dataset(<release folder>, config)` yields PIL images
# with no cast (the card's `dataset_info` says the same).
RELEASE_SCHEMA = _COLUMNS.with_metadata(
    {HF_METADATA_KEY: json.dumps({"info": {"features": hf_features(_COLUMNS)}}).encode()}
)
# The published configs' level per subset (RealStudioFlat easy, AIGen-Studio medium, both
# StreetLooks hard, as the paper says); every row of a subset carries its subset's level.
SUBSET_DIFFICULTY = {
    "real_studio_flat": "easy",
    "aigen_studio": "medium",
    "real_streetlook": "hard",
    "aigen_streetlook": "hard",
}
TASKS = {
    "real_studio_flat": "studio_to_product",
    "aigen_studio": "aigen_studio_to_product",
    "real_streetlook": "street_crop_to_product",
    "aigen_streetlook": "aigen_street_crop_to_product",
    NOISE: "distractor",
}
# Every data file of a release, as '<subset>/<split>' (no extension), in the published order.
SPLIT_NAMES = (*(f"{s}/{split}" for s in SUBSETS for split in SPLITS), f"{NOISE}/gallery")
FILES = tuple(f"{name}.parquet" for name in SPLIT_NAMES)
MANIFEST = "manifest.json"
LATEST = "LATEST"
# Release rows per Parquet row group: part of the files' bytes, and the writer's (and the verifier's)
# memory bound.
ROW_GROUP_ROWS = 128
# `releases/withdrawn/<version>.json`: the record of a withdrawn release (reason, time).
WITHDRAWN = "withdrawn"
# The other files a release folder holds beside its data files and `manifest.json`: the dataset
# card, the Croissant file and the release report (docs/release.md, "Layout").
SIDECARS = ("README.md", "croissant.json", "report.html")
RELEASE_FILES = frozenset((*FILES, *SIDECARS))


class ReleaseKeyError(ValueError):
    """A key of a manifest's `files` that is not a file of the release format: refused as a path."""


def check_file_key(key: object, *, release: str | None = None) -> str:
    """`key` when it names a file of the release format (`<subset>/<split>.parquet` of `FILES`, or
    one of `SIDECARS`); else `ReleaseKeyError` naming the release and the key.

    Every key read from a manifest passes here before it becomes a path, a view's name or anything
    else: the key is compared with our own names, never parsed, so nothing the lake holds (a file
    name carrying SQL, `../`, an `extra.parquet`) reaches a path or a statement.
    """
    if isinstance(key, str) and key in RELEASE_FILES:
        return key
    where = f"release {release}: " if release else ""
    raise ReleaseKeyError(
        f"{where}manifest file key {key!r} is not a file of the release format "
        f"(<subset>/<split>.parquet or {', '.join(SIDECARS)}); refused as a path"
    )


def split_of(key: str) -> tuple[str, str]:
    """(subset, split) of a data file key that `check_file_key` accepted, from our own names."""
    return _SPLITS[key]


_SPLITS = {f"{s}/{split}.parquet": (s, split) for s in SUBSETS for split in SPLITS} | {
    f"{NOISE}/gallery.parquet": (NOISE, "gallery")
}


# ---------------------------------------------------------------------- version names
# A release is `vYYYYMMDD` (its as-of day); a correction of a published release (it never
# changes bytes: docs/release.md, "Published means immutable") is `vYYYYMMDD.N`, N >= 1, and
# sorts right after its base and before the next day. `version_key` is the one order every
# reader uses (`latest`, `--releases A..B`, the leaderboard, the contamination gap): plain
# string order would put `v20261201.10` before `v20261201.2`.
_VERSION = re.compile(r"v(\d{8})(?:\.([1-9][0-9]{0,3}))?")


class VersionError(ValueError):
    """A text that is not a release version (`vYYYYMMDD` or `vYYYYMMDD.N`, N >= 1)."""


def parse_version(text: object) -> tuple[dt.date, int]:
    """(as-of day, revision) of a version name; revision 0 is the original release."""
    match = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise VersionError(f"release version {text!r} is not of the form vYYYYMMDD or vYYYYMMDD.N")
    try:
        day = dt.datetime.strptime(match.group(1), "%Y%m%d").date()
    except ValueError as exc:
        raise VersionError(f"release version {text!r} names no calendar day") from exc
    return day, int(match.group(2) or 0)


def version_key(version: str) -> tuple[dt.date, int]:
    """The sort key of a version name: by day, then by revision (the original first)."""
    return parse_version(version)


def version_base(version: str) -> str:
    """`vYYYYMMDD` of a version or of a correction of it."""
    return f"v{parse_version(version)[0]:%Y%m%d}"


def version_revision(version: str) -> int:
    """0 for `vYYYYMMDD`, N for its correction `vYYYYMMDD.N`."""
    return parse_version(version)[1]


def next_revision(version: str, existing: Iterable[str]) -> str:
    """The name of the next correction of `version`'s base among `existing` version names."""
    base = version_base(version)
    taken = [version_revision(v) for v in existing if _VERSION.fullmatch(v) and version_base(v) == base]
    return f"{base}.{max([version_revision(version), *taken]) + 1}"
