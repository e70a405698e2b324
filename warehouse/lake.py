"""The lake: content-addressed image bytes and append-only Parquet tables.

Layout under the storage root (a local folder or any fsspec URL such as `s3://bucket/prefix`):

    images/ab/cd/<sha256>            image bytes, named by their sha256, written once
    tables/<table>/part-<id>.parquet append-only fragments of one table
    releases/…                       see `warehouse.release`

Guarantees a stage can rely on:
- A fragment becomes visible in one step (temp name, fsync, rename locally; a single
  object PUT on object stores), so a reader never sees half a file and a killed writer
  leaves only `.tmp-*` debris, which readers ignore and `reconcile()` deletes.
- `append` is idempotent by the record's key: rows whose key is already stored, or
  repeated within the call, are not written again, so rerunning a stage adds nothing.
- Only one process writes a table at a time (the flow's process); Dask or Ray workers
  return records to it. Many processes may read.
"""

from __future__ import annotations

import hashlib
import io
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from lookbench_live.schema.records import TABLES, Record, arrow_schema_of, to_arrow

DEFAULT_HOME = "./lookbench-data"
# Fixed writer options: together with a stable row order they make files reproducible.
PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True, "use_dictionary": True}


class LakeError(RuntimeError):
    """A lake operation failed; the message names the table or path."""


def resolve_home(home: str | os.PathLike[str] | None = None) -> str:
    """The storage root: the argument, else `LOOKBENCH_HOME`, else `./lookbench-data`."""
    value = str(home) if home is not None else os.environ.get("LOOKBENCH_HOME", DEFAULT_HOME)
    if "://" in value:
        return value.rstrip("/")
    return str(Path(value).expanduser().resolve())


def is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


def atomic_write_bytes(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Write `data` to `path` so that readers see nothing or all of it."""
    if isinstance(fs, fsspec.implementations.local.LocalFileSystem):
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    else:
        # One PUT is atomic on object stores: the object exists whole or not at all.
        fs.pipe_file(path, data)


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **PARQUET_OPTIONS)
    return sink.getvalue()


class Lake:
    """A storage root holding image bytes and the pipeline's tables."""

    def __init__(
        self, home: str | os.PathLike[str] | None = None, storage_options: dict[str, Any] | None = None
    ):
        self.home = resolve_home(home)
        options = dict(storage_options or {})
        if not is_local(self.home):
            # Object-store clients (s3fs, gcsfs) cache listings forever by default, so a
            # long-lived reader would never see fragments or manifests another process
            # committed. The lake decides by listing: it must always be current.
            options.setdefault("use_listings_cache", False)
        self.fs, self.root = fsspec.core.url_to_fs(self.home, **options)
        self.fs.makedirs(self.root, exist_ok=True)
        self._key_cache: dict[str, tuple[frozenset[str], set[tuple[Any, ...]]]] = {}

    # ------------------------------------------------------------------ paths
    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def url(self, *parts: str) -> str:
        """A path as a URL that fsspec or the user can open again."""
        path = self.path(*parts)
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return path if protocol in ("file", "local") else f"{protocol}://{path}"

    @property
    def local(self) -> bool:
        return isinstance(self.fs, fsspec.implementations.local.LocalFileSystem)

    # ------------------------------------------------------------------ images
    def image_path(self, sha256: str) -> str:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            # Names come only from our own hashes; anything else could walk out of the lake.
            raise LakeError(f"not a sha256 hex digest: {sha256!r}")
        return self.path("images", sha256[:2], sha256[2:4], sha256)

    def put_image(self, data: bytes) -> str:
        """Store image bytes by content; returns their sha256. Storing twice is a no-op."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.image_path(sha)
        if not self.fs.exists(path):
            atomic_write_bytes(self.fs, path, data)
        return sha

    def has_image(self, sha256: str) -> bool:
        return bool(self.fs.exists(self.image_path(sha256)))

    def get_image(self, sha256: str) -> bytes:
        try:
            data: bytes = self.fs.cat_file(self.image_path(sha256))
        except FileNotFoundError as exc:
            raise LakeError(f"image {sha256} is not in the lake at {self.home}") from exc
        return data

    # ------------------------------------------------------------------ tables
    def table_dir(self, table: str) -> str:
        if table not in TABLES:
            raise LakeError(f"unknown table {table!r}; tables are {sorted(TABLES)}")
        return self.path("tables", table)

    def fragments(self, table: str) -> list[str]:
        """Committed fragments of a table, in name order (temp files are never listed)."""
        directory = self.table_dir(table)
        try:
            # One listing request; an `exists` check first would cost two more on object stores.
            listed = self.fs.ls(directory, detail=False)
        except FileNotFoundError:
            return []
        return sorted(p for p in listed if _is_fragment(p))

    def read(self, table: str, columns: Sequence[str] | None = None) -> pa.Table:
        """The whole table (all fragments) with the record's current schema."""
        schema = arrow_schema_of(TABLES[table])
        files = self.fragments(table)
        if not files:
            empty = schema.empty_table()
            return empty.select(list(columns)) if columns else empty
        if self.local:
            dataset = pads.dataset(files, schema=schema, filesystem=self.fs, format="parquet")
        else:
            # Object stores: one GET per fragment, issued concurrently by the client, instead of
            # pyarrow's per-file metadata request and ranged reads through fsspec (without a
            # listings cache those cost several round trips per fragment).
            blobs = self.fs.cat(files)
            parquet = pads.ParquetFileFormat()
            fragments = [parquet.make_fragment(pa.BufferReader(blobs[path])) for path in files]
            dataset = pads.FileSystemDataset(fragments, schema=schema, format=parquet)
        return dataset.to_table(columns=list(columns) if columns else None)

    def dataset(self, table: str) -> pads.Dataset:
        schema = arrow_schema_of(TABLES[table])
        files = self.fragments(table)
        if not files:
            return pads.dataset(schema.empty_table())
        return pads.dataset(files, schema=schema, filesystem=self.fs, format="parquet")

    def records(self, table: str) -> Iterator[Record]:
        cls = TABLES[table]
        for row in self.read(table).to_pylist():
            yield cls.from_row(row)

    def keys(self, table: str) -> set[tuple[Any, ...]]:
        """Keys already stored in a table (cached until a fragment appears or vanishes)."""
        files = frozenset(self.fragments(table))
        cached = self._key_cache.get(table)
        if cached is not None and cached[0] == files:
            return cached[1]
        cls = TABLES[table]
        key_table = self.read(table, columns=list(cls.__key__))
        columns = [key_table.column(name).to_pylist() for name in cls.__key__]
        keys = set(zip(*columns, strict=True)) if columns and columns[0] else set()
        self._key_cache[table] = (files, keys)
        return keys

    def append(self, records: Iterable[Record]) -> int:
        """Append records (one table per call) that are not stored yet; returns rows written."""
        batch = list(records)
        if not batch:
            return 0
        cls = type(batch[0])
        if any(type(r) is not cls for r in batch):
            raise LakeError("append takes records of one table per call")
        table = cls.__table__
        existing = self.keys(table)
        fresh: list[Record] = []
        seen: set[tuple[Any, ...]] = set()
        for record in batch:
            key = record.key()
            if key in existing or key in seen:
                continue
            seen.add(key)
            fresh.append(record)
        if not fresh:
            return 0
        arrow = to_arrow(fresh, cls)
        # The fragment name derives from its keys: a retried write of the same rows
        # lands on the same name instead of a second copy.
        digest = hashlib.sha256("\n".join(sorted(repr(k) for k in seen)).encode()).hexdigest()[:24]
        path = self.path("tables", table, f"part-{digest}.parquet")
        self.fs.makedirs(self.table_dir(table), exist_ok=True)
        atomic_write_bytes(self.fs, path, parquet_bytes(arrow))
        files = frozenset(self.fragments(table))
        self._key_cache[table] = (files, existing | seen)
        return len(fresh)

    def reconcile(self) -> list[str]:
        """Delete temp files left by killed writers; returns what was removed.

        Safe only when no writer is running (the flow calls it at start, under its lock).
        """
        removed: list[str] = []
        for base in ("tables", "images"):
            top = self.path(base)
            if not self.fs.exists(top):
                continue
            for path in self.fs.find(top):
                if os.path.basename(path).startswith(".tmp-"):
                    self.fs.rm_file(path)
                    removed.append(path)
        return removed

    @contextmanager
    def writer_lock(self, name: str = "lake") -> Iterator[None]:
        """Exclusive lock for the one writer process.

        Local lakes: an `flock`, released by the kernel even when the holder is killed.
        Object stores: a lock object created only if absent (a conditional PUT); a killed
        holder leaves it behind, and the next writer fails naming it, to be deleted by hand
        once no run is active.
        """
        if not self.local:
            yield from self._object_store_lock(name)
            return
        import fcntl

        lock_dir = self.path("locks")
        os.makedirs(lock_dir, exist_ok=True)
        with open(os.path.join(lock_dir, f"{name}.lock"), "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise LakeError(
                    f"another lookbench-live process holds the writer lock of {self.home} ({name}); "
                    "wait for it to finish"
                ) from exc
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _object_store_lock(self, name: str) -> Iterator[None]:
        import json
        import socket

        path = self.path("locks", f"{name}.lock")
        holder = {"host": socket.gethostname(), "pid": os.getpid(), "id": uuid.uuid4().hex}
        try:
            # A conditional PUT (If-None-Match: *): of two writers racing, exactly one succeeds.
            self.fs.pipe_file(path, json.dumps(holder).encode(), mode="create")
        except (FileExistsError, OSError) as exc:
            if not isinstance(exc, FileExistsError) and "PreconditionFailed" not in repr(exc):
                raise
            raise LakeError(
                f"another lookbench-live process holds the writer lock of {self.home} ({self.url('locks', name)}.lock); "
                "wait for it to finish, or delete that object if no run is active (a killed run leaves it)"
            ) from exc
        try:
            yield
        finally:
            self.fs.rm_file(path)


def _is_fragment(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(".parquet") and not name.startswith(".")
