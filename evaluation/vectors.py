"""Embeddings by image sha256: the per-(release, model) cache and submitted files.

Cache: `<lake>/cache/embeddings/<release>/<model-slug>.parquet` with columns
`sha256` string and `embedding` list<float32>. Entries are keyed by content, so a
rebuilt release reuses what still applies and embeds only new images; the file is
replaced atomically, so a killed run leaves the previous cache intact.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lookbench_live.warehouse.lake import PARQUET_OPTIONS, Lake, atomic_local_file, atomic_write_bytes

CACHE_SCHEMA = pa.schema([("sha256", pa.string()), ("embedding", pa.list_(pa.float32()))])


class EmbeddingsError(ValueError):
    """Submitted embeddings do not fit the release; the message names the first offender."""


def model_slug(model: str) -> str:
    """A file-name-safe, collision-free name for a model spec."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")[-60:] or "model"
    return f"{readable}-{hashlib.sha256(model.encode()).hexdigest()[:10]}"


def cache_path(lake: Lake, version: str, model: str) -> str:
    return lake.path("cache", "embeddings", version, f"{model_slug(model)}.parquet")


class Vectors(Mapping[str, np.ndarray]):
    """sha256 -> embedding, held as one float32 matrix (one row per image) and a row index.

    A month of 100,000 images × 1,836 dims is 0.75 GB as one matrix; as Python floats it was
    over 4 GB. `vectors[sha]` is a read-only view of its row; `rows(shas)` gives row numbers so
    a subset's corpus is taken from the matrix without copying it per image."""

    __slots__ = ("_index", "matrix", "shas")

    def __init__(self, shas: list[str], matrix: np.ndarray, index: dict[str, int] | None = None):
        if matrix.ndim != 2 or matrix.shape[0] != len(shas) or matrix.dtype != np.float32:
            raise ValueError(f"{len(shas)} sha256 need a ({len(shas)}, d) float32 matrix, got {matrix.shape}")
        self.shas = shas
        self.matrix = matrix
        self._index = index if index is not None else {sha: i for i, sha in enumerate(shas)}

    @classmethod
    def of(cls, vectors: Mapping[str, np.ndarray]) -> Vectors:
        """A `Vectors` of any mapping (a dict of rows, or a `Vectors` itself, returned as is)."""
        if isinstance(vectors, Vectors):
            return vectors
        shas = list(vectors)
        if not shas:
            return cls([], np.zeros((0, 0), np.float32))
        width = len(vectors[shas[0]])
        matrix = np.empty((len(shas), width), np.float32)
        for i, sha in enumerate(shas):
            row = vectors[sha]
            if len(row) != width:
                raise EmbeddingsError(f"embedding of image {sha} has width {len(row)}, expected {width}")
            matrix[i] = row
        return cls(shas, matrix)

    @property
    def width(self) -> int:
        return int(self.matrix.shape[1])

    def __getitem__(self, sha: str) -> np.ndarray:
        row = self.matrix[self._index[sha]]
        row.flags.writeable = False
        return row

    def __contains__(self, sha: object) -> bool:
        return sha in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def rows(self, shas: Sequence[str]) -> np.ndarray:
        """Row numbers (int64) of `shas` in `matrix`; KeyError names an absent image."""
        index = self._index
        return np.fromiter((index[s] for s in shas), np.int64, count=len(shas))

    def merged(self, other: Mapping[str, np.ndarray]) -> Vectors:
        """These vectors with `other`'s added (an image in both takes `other`'s row)."""
        if not other:
            return self
        if not self._index:
            return Vectors.of(other)
        added = Vectors.of(other)
        if added.width != self.width:
            raise EmbeddingsError(f"new embeddings have width {added.width}, the cache has {self.width}")
        keep = [s for s in self._index if s not in added]
        shas = keep + added.shas
        matrix = np.concatenate([self.matrix[self.rows(keep)], added.matrix])
        return Vectors(shas, matrix)


def read_vectors(
    table: pa.Table | Iterable[pa.RecordBatch], source: str, *, num_rows: int | None = None
) -> Vectors:
    """sha256 -> float32 vector from a (sha256, embedding) table or stream of record batches
    (`num_rows` then gives their total); checks nulls, NaN and width.

    The embeddings go from Arrow straight into one preallocated float32 matrix, a batch at a
    time, never through Python floats."""
    if isinstance(table, pa.Table):
        _check_columns(table.schema, source)
        num_rows = table.num_rows
        batches: Iterable[pa.RecordBatch] = table.to_batches()
    else:
        if num_rows is None:
            raise ValueError("read_vectors of record batches needs num_rows")
        batches = table
    shas: list[str] = []
    matrix: np.ndarray | None = None
    width: int | None = None
    for batch in batches:
        _check_columns(batch.schema, source)
        sha_col = batch.column(batch.schema.get_field_index("sha256"))
        emb_col = batch.column(batch.schema.get_field_index("embedding"))
        batch_shas = sha_col.to_pylist()
        if sha_col.null_count:
            raise EmbeddingsError(f"{source} has a row without sha256")
        if emb_col.null_count:
            sha = batch_shas[emb_col.is_null().to_pylist().index(True)]
            raise EmbeddingsError(f"{source}: embedding of image {sha} is null")
        if not (pa.types.is_list(emb_col.type) or pa.types.is_large_list(emb_col.type)
                or pa.types.is_fixed_size_list(emb_col.type)):  # fmt: skip
            raise EmbeddingsError(f"{source}: column 'embedding' is {emb_col.type}, not a list of floats")
        lengths = pc.list_value_length(emb_col).to_numpy(zero_copy_only=False)
        if len(lengths):
            if width is None:
                width = int(lengths[0])
            bad = np.flatnonzero(lengths != width)
            if len(bad) or width == 0:
                i = int(bad[0]) if len(bad) else 0
                raise EmbeddingsError(
                    f"{source}: embedding of image {batch_shas[i]} has width {int(lengths[i])}, "
                    f"the first row has {width}"
                )
        if matrix is None and width is not None:
            matrix = np.empty((num_rows, width), np.float32)
        if batch_shas:
            assert matrix is not None and width is not None
            try:
                values = pc.list_flatten(emb_col).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid as exc:
                raise EmbeddingsError(f"{source}: embeddings are not numbers: {exc}") from exc
            if values.dtype.kind not in "fiu":
                raise EmbeddingsError(f"{source}: embeddings are {values.dtype}, not numbers")
            block = matrix[len(shas) : len(shas) + len(batch_shas)]
            block[...] = values.reshape(len(batch_shas), width)
            finite = np.isfinite(block).all(axis=1)
            if not finite.all():
                i = int(np.flatnonzero(~finite)[0])
                pos = int(np.flatnonzero(~np.isfinite(block[i]))[0])
                raise EmbeddingsError(
                    f"{source}: embedding of image {batch_shas[i]} has a non-finite value at position {pos}"
                )
            shas += batch_shas
    if matrix is None:
        return Vectors([], np.zeros((0, 0), np.float32))
    if len(shas) != matrix.shape[0]:
        raise ValueError(f"{source}: {len(shas)} rows read, {matrix.shape[0]} announced")
    index: dict[str, int] = {}
    for i, sha in enumerate(shas):
        first = index.setdefault(sha, i)
        if first != i and not np.array_equal(matrix[first], matrix[i]):
            raise EmbeddingsError(f"{source}: image {sha} has two different embeddings")
    return Vectors(shas, matrix, index)


def _check_columns(schema: pa.Schema, source: str) -> None:
    for column in ("sha256", "embedding"):
        if column not in schema.names:
            raise EmbeddingsError(
                f"{source} has no column {column!r} (needs sha256 string, embedding list<float>)"
            )


def load_submitted(path: str, required: Sequence[str]) -> Vectors:
    """Vectors of a submitted `--embeddings` file; every required sha256 must be present."""
    import fsspec

    try:
        with fsspec.open(path, "rb") as handle:
            vectors = _read_parquet(handle, f"embeddings file {path}")
    except FileNotFoundError as exc:
        raise EmbeddingsError(f"embeddings file {path} does not exist") from exc
    except (pa.ArrowInvalid, KeyError) as exc:
        raise EmbeddingsError(
            f"embeddings file {path} is not a Parquet file with sha256 and embedding: {exc}"
        ) from exc
    missing = [sha for sha in required if sha not in vectors]
    if missing:
        raise EmbeddingsError(
            f"embeddings file {path} lacks image {missing[0]} (and {len(missing) - 1} more) of the release"
        )
    return vectors


READ_BATCH = 8192  # Parquet rows decoded at once: Arrow holds one batch, the matrix holds all


def _read_parquet(handle: Any, source: str) -> Vectors:  # a local path or a binary file object
    """`read_vectors` of a Parquet file, one batch at a time (only the matrix is whole).

    `pre_buffer=False`: with pyarrow's default (True) `iter_batches` reads the column chunks of
    many row groups ahead, so a 0.7 GB cache held about as much again in Arrow buffers beside
    the matrix (700×-shaped release: 1,814 MB peak reading it, 1,146 MB without; bench/eval_memory.py)."""
    parquet = pq.ParquetFile(handle, pre_buffer=False)
    _check_columns(parquet.schema_arrow, source)
    try:
        return read_vectors(
            parquet.iter_batches(batch_size=READ_BATCH, columns=["sha256", "embedding"]),
            source,
            num_rows=parquet.metadata.num_rows,
        )
    finally:
        # Arrow's allocator keeps freed batches for reuse; evaluation allocates with numpy and torch.
        pa.default_memory_pool().release_unused()


def load_cache(lake: Lake, version: str, model: str) -> Vectors:
    path = cache_path(lake, version, model)
    if not lake.fs.exists(path):
        return Vectors([], np.zeros((0, 0), np.float32))
    try:
        if lake.local:
            # Arrow reads a local file natively; through a Python file object every page would
            # also pass through Python bytes (as much again as the matrix).
            return _read_parquet(lake.fs._strip_protocol(path), f"embedding cache {path}")
        with lake.fs.open(path, "rb") as handle:
            return _read_parquet(handle, f"embedding cache {path}")
    except (EmbeddingsError, pa.ArrowInvalid, OSError, ValueError):
        # A cache is only an accelerator: a bad one is rebuilt, never trusted.
        return Vectors([], np.zeros((0, 0), np.float32))


WRITE_BATCH = 8192  # cache rows per Parquet row group: the writer's memory bound


def save_cache(
    lake: Lake, version: str, model: str, vectors: Mapping[str, np.ndarray], *, path: str | None = None
) -> str:
    """Write `vectors` atomically to the model's cache (or to `path`, a shard's part file),
    sorted by sha256, streamed `WRITE_BATCH` rows at a time."""
    path = path or cache_path(lake, version, model)
    held = Vectors.of(vectors)
    shas = sorted(held)
    order = held.rows(shas)

    def write(handle: Any) -> None:
        with pq.ParquetWriter(handle, CACHE_SCHEMA, **PARQUET_OPTIONS) as writer:
            if not shas:
                writer.write_table(CACHE_SCHEMA.empty_table())
            for start in range(0, len(shas), WRITE_BATCH):
                rows = held.matrix[order[start : start + WRITE_BATCH]]
                offsets = pa.array(np.arange(len(rows) + 1, dtype=np.int32) * held.width, pa.int32())
                embedding = pa.ListArray.from_arrays(offsets, pa.array(rows.reshape(-1), pa.float32()))
                batch = pa.table(
                    {
                        "sha256": pa.array(shas[start : start + WRITE_BATCH], pa.string()),
                        "embedding": embedding,
                    },
                    schema=CACHE_SCHEMA,
                )
                writer.write_table(batch, row_group_size=WRITE_BATCH)

    lake.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    if lake.local:
        with atomic_local_file(path) as handle:
            write(handle)
    else:
        # One PUT is atomic on object stores; the compressed file is far smaller than the matrix.
        sink = io.BytesIO()
        write(sink)
        atomic_write_bytes(lake.fs, path, sink.getvalue())
    return path
