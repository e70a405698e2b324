"""Writing a release's files into its staging folder: rows as Parquet (streamed a row group at a
time, checksummed as written), sidecar files, and a full disk reported as nothing committed."""

from __future__ import annotations

import contextlib
import errno
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lookbench_live.schema.committed import ReleaseError
from lookbench_live.schema.release import RELEASE_SCHEMA, ROW_GROUP_ROWS
from lookbench_live.warehouse.assemble import materialize
from lookbench_live.warehouse.lake import PARQUET_OPTIONS, Lake, atomic_local_file, atomic_write_bytes

__all__ = ["ROW_GROUP_ROWS", "StagedRelease", "write_rows"]


@dataclass(slots=True)
class StagedRelease:
    """A release written to its staging folder (data files, card, Croissant), not yet committed.

    Later steps may add files to `path` (the report); `commit_release` lists and checksums
    every file there, writes the manifest, verifies and commits.
    """

    version: str
    path: str  # staging folder on lake.fs
    target: str
    replace: bool
    info: dict[str, Any]  # the manifest's description of the data (window, rows, models)
    files: dict[str, dict[str, Any]]  # rel -> {sha256, size[, rows]} of the files written so far
    dropped: dict[str, int]
    annotation_mode: str
    hashes: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # for the released-image index

    @property
    def rows(self) -> dict[str, int]:
        return dict(self.info["rows"])


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def _disk_full_is_reported(lake: Lake, version: str, staging: str) -> Iterator[None]:
    """A full disk or quota (R3) while a release is staged or committed: the staging folder goes
    (which also frees what it took), and the error says that nothing was committed. The writes
    before the commit point only touch the staging folder, so the previous release and `LATEST`
    are as they were; a rerun stages again from the start."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in FULL_DISK:
            raise
        with contextlib.suppress(OSError):
            if lake.fs.exists(staging):
                lake.fs.rm(staging, recursive=True)
        raise ReleaseError(
            f"release {version}: the lake's storage is full ({exc.strerror or exc}); nothing was "
            "committed, the previous release and `latest` are unchanged; free space and rerun"
        ) from exc


def _put(lake: Lake, staged: StagedRelease, rel: str, data: bytes, rows: int | None = None) -> None:
    atomic_write_bytes(lake.fs, f"{staged.path}/{rel}", data)
    staged.files[rel] = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        **({"rows": rows} if rows is not None else {}),
    }


def write_rows(handle: Any, rows: list[dict[str, Any]], load_image: Callable[[str], bytes]) -> int:
    """Write release `rows` (in order, image bytes loaded by sha256 where `None`) to the binary
    file `handle` as Parquet, `ROW_GROUP_ROWS` rows per row group; returns the row count.

    Only one row group's images are in memory at a time, so a 70,000-image release is written
    in the memory of 128 rows. The same rows give the same bytes (fixed writer options)."""
    with pq.ParquetWriter(handle, RELEASE_SCHEMA, **PARQUET_OPTIONS) as writer:
        if not rows:
            writer.write_table(RELEASE_SCHEMA.empty_table())
        for start in range(0, len(rows), ROW_GROUP_ROWS):
            chunk = [materialize(row, load_image) for row in rows[start : start + ROW_GROUP_ROWS]]
            writer.write_table(
                pa.Table.from_pylist(chunk, schema=RELEASE_SCHEMA), row_group_size=ROW_GROUP_ROWS
            )
            del chunk
    return len(rows)


class _HashingWriter:
    """A binary file wrapper that checksums the bytes as the writer hands them over.

    The manifest's checksum must be of what we produced, not of what the store gives back:
    hashing a read-back would bless a byte the store (or disk) altered after the write, and
    the verification before commit, which compares the stored file against this checksum,
    would then pass a corrupted release.
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._digest.update(view)
        self.size += view.nbytes
        self._handle.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._handle.flush()

    @property
    def closed(self) -> bool:
        return bool(self._handle.closed)

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def close(self) -> None:  # the owner of the real handle closes it
        pass

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def _put_rows(
    lake: Lake,
    staged: StagedRelease,
    rel: str,
    rows: list[dict[str, Any]],
    load_image: Callable[[str], bytes],
) -> None:
    """Stream `rows` into `<staging>/<rel>` (whole or not at all) and record the checksum of the
    bytes written (never of a read-back: see `_HashingWriter`)."""
    path = f"{staged.path}/{rel}"
    if lake.local:
        with atomic_local_file(path) as handle:
            sink = _HashingWriter(handle)
            count = write_rows(sink, rows, load_image)
    else:
        # An object-store upload appears on close, whole (multipart); the staging folder is
        # unpublished anyway until the manifest is written.
        with lake.fs.open(path, "wb") as handle:
            sink = _HashingWriter(handle)
            count = write_rows(sink, rows, load_image)
    staged.files[rel] = {"sha256": sink.hexdigest(), "size": sink.size, "rows": count}
