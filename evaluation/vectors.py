"""Embeddings by image sha256: the per-(release, model) cache and submitted files.

Cache: `<lake>/cache/embeddings/<release>/<model-slug>.parquet` with columns
`sha256` string and `embedding` list<float32>. Entries are keyed by content, so a
rebuilt release reuses what still applies and embeds only new images; the file is
replaced atomically, so a killed run leaves the previous cache intact.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lookbench_live.warehouse.lake import Lake, atomic_write_bytes, parquet_bytes


class EmbeddingsError(ValueError):
    """Submitted embeddings do not fit the release; the message names the first offender."""


def model_slug(model: str) -> str:
    """A file-name-safe, collision-free name for a model spec."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")[-60:] or "model"
    return f"{readable}-{hashlib.sha256(model.encode()).hexdigest()[:10]}"


def cache_path(lake: Lake, version: str, model: str) -> str:
    return lake.path("cache", "embeddings", version, f"{model_slug(model)}.parquet")


def read_vectors(table: pa.Table, source: str) -> dict[str, np.ndarray]:
    """sha256 -> float32 vector from a (sha256, embedding) table; checks NaN and width."""
    for column in ("sha256", "embedding"):
        if column not in table.column_names:
            raise EmbeddingsError(
                f"{source} has no column {column!r} (needs sha256 string, embedding list<float>)"
            )
    shas = table.column("sha256").to_pylist()
    vectors = table.column("embedding").to_pylist()
    out: dict[str, np.ndarray] = {}
    width: int | None = None
    for sha, vector in zip(shas, vectors, strict=True):
        if sha is None:
            raise EmbeddingsError(f"{source} has a row without sha256")
        if vector is None:
            raise EmbeddingsError(f"{source}: embedding of image {sha} is null")
        array = np.asarray(vector, dtype=np.float32)
        if width is None:
            width = len(array)
        if len(array) != width or width == 0:
            raise EmbeddingsError(
                f"{source}: embedding of image {sha} has width {len(array)}, the first row has {width}"
            )
        if not np.isfinite(array).all():
            bad = next(i for i, v in enumerate(array.tolist()) if not math.isfinite(v))
            raise EmbeddingsError(
                f"{source}: embedding of image {sha} has a non-finite value at position {bad}"
            )
        if sha in out and not np.array_equal(out[sha], array):
            raise EmbeddingsError(f"{source}: image {sha} has two different embeddings")
        out[sha] = array
    return out


def load_submitted(path: str, required: Sequence[str]) -> dict[str, np.ndarray]:
    """Vectors of a submitted `--embeddings` file; every required sha256 must be present."""
    import fsspec

    try:
        with fsspec.open(path, "rb") as handle:
            table = pq.read_table(handle, columns=["sha256", "embedding"])
    except FileNotFoundError as exc:
        raise EmbeddingsError(f"embeddings file {path} does not exist") from exc
    except (pa.ArrowInvalid, KeyError) as exc:
        raise EmbeddingsError(
            f"embeddings file {path} is not a Parquet file with sha256 and embedding: {exc}"
        ) from exc
    vectors = read_vectors(table, f"embeddings file {path}")
    missing = [sha for sha in required if sha not in vectors]
    if missing:
        raise EmbeddingsError(
            f"embeddings file {path} lacks image {missing[0]} (and {len(missing) - 1} more) of the release"
        )
    return vectors


def load_cache(lake: Lake, version: str, model: str) -> dict[str, np.ndarray]:
    path = cache_path(lake, version, model)
    if not lake.fs.exists(path):
        return {}
    with lake.fs.open(path, "rb") as handle:
        table = pq.read_table(handle)
    try:
        return read_vectors(table, f"embedding cache {path}")
    except EmbeddingsError:
        # A cache is only an accelerator: a bad one is rebuilt, never trusted.
        return {}


def save_cache(
    lake: Lake, version: str, model: str, vectors: dict[str, np.ndarray], *, path: str | None = None
) -> str:
    """Write `vectors` atomically to the model's cache (or to `path`, a shard's part file)."""
    path = path or cache_path(lake, version, model)
    shas = sorted(vectors)
    table = pa.table(
        {
            "sha256": pa.array(shas, pa.string()),
            "embedding": pa.array([vectors[s].astype(np.float32) for s in shas], pa.list_(pa.float32())),
        }
    )
    lake.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    atomic_write_bytes(lake.fs, path, parquet_bytes(table))
    return path
