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
  repeated within the call, are not written again, so rerunning a stage adds nothing. The
  stored keys are looked up in the table's key index (`derived/keys/<table>/`, one sorted
  file of 64-bit key digests per fragment), not by reading the table's key columns: only a
  fragment whose digests match a key of the batch is read, to confirm it exactly.
- Every read is counted (`Lake.reads`: fragments opened and rows returned per table), so a
  test can show that a month's step reads the window, not the lake's history.
- Only one process writes a table at a time (the flow's process); Dask or Ray workers
  return records to it. Many processes may read.
- Bytes are checked when read: fragments carry Parquet page checksums and a footer checked
  against itself, so a flipped byte is an unreadable fragment, never other values (skipped and
  reported; in a compliance table, `FragmentError`: the table fails closed); image bytes
  read for a release are re-hashed against their name (`get_verified_image`).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import io
import json
import logging
import os
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.records import (
    COMPLIANCE_TABLES,
    TABLES,
    Record,
    Rejection,
    arrow_schema_of,
    to_arrow,
)

logger = logging.getLogger(__name__)

DEFAULT_HOME = "./lookbench-data"
# Fixed writer options: together with a stable row order they make files reproducible.
# Page checksums (CRC-32 of each data page, X13): a flipped byte in a page is an error on read
# (`SCAN_OPTIONS`), never a silently different value.
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "write_statistics": True,
    "use_dictionary": True,
    "write_page_checksum": True,
}
# Every lake read checks the page checksums a fragment carries; fragments written before they
# were on carry none and read as before.
SCAN_OPTIONS = pads.ParquetFragmentScanOptions(page_checksum_verification=True)
PARQUET_FORMAT = pads.ParquetFileFormat(default_fragment_scan_options=SCAN_OPTIONS)


class LakeError(RuntimeError):
    """A lake operation failed; the message names the table or path."""


class FragmentError(LakeError):
    """A committed fragment of a compliance table (`COMPLIANCE_TABLES`) cannot be read: cut short,
    corrupt, failing its page checksums or its footer check. Such a table fails closed (X10):
    a takedown list read without one of its fragments would publish what it lists, so every
    step that reads it stops, naming the fragment. Other tables skip such a fragment and
    report it (`Lake.skipped`)."""

    def __init__(self, table: str, path: str, cause: str):
        self.table, self.path, self.cause = table, path, cause
        super().__init__(
            f"table {table!r}: fragment {path} cannot be read ({cause}); {table} is a compliance "
            "table, so nothing that depends on it runs until it is whole: restore the fragment from "
            f"a backup, or move it out of tables/{table}/ and add its entries again"
        )


class LakeNotFound(LakeError):
    """A read command named a lake root that does not exist (nothing is created for it)."""


class ImageCorrupt(LakeError):
    """An image file whose bytes no longer hash to its name (a flipped byte, a truncated copy, a
    file replaced by hand): the lake's copy is damaged and is never published."""

    def __init__(self, sha256: str, path: str, actual: str):
        self.sha256, self.path, self.actual = sha256, path, actual
        super().__init__(
            f"image {sha256} is damaged: the bytes at {path} hash to {actual}, not to their name; "
            "restore the file from a backup or the original (ingest stores the same bytes again)"
        )


@dataclass(slots=True)
class ReadStats:
    """What a lake object has read, per table: fragments opened and rows returned (and key-index
    segments read). Reads through `Lake.read` are counted; tests use it to show that a step's
    reads follow the window, not the number of earlier months."""

    fragments: Counter[str] = field(default_factory=Counter)
    rows: Counter[str] = field(default_factory=Counter)
    key_segments: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        self.fragments.clear()
        self.rows.clear()
        self.key_segments.clear()


def key_digests(keys: pa.Table) -> np.ndarray:
    """One 64-bit digest per row of a table of key columns (the record's Arrow types), the same
    whether the rows come from new records or from a stored fragment: each value is cast to text
    by Arrow, so a timestamp or a null is spelled one way."""
    if keys.num_rows == 0:
        return np.empty(0, dtype=np.uint64)
    texts = [
        pc.fill_null(pc.cast(keys.column(i), pa.string()), "\x00").to_pylist()
        for i in range(keys.num_columns)
    ]
    out = np.empty(keys.num_rows, dtype=np.uint64)
    for row, values in enumerate(zip(*texts, strict=True)):
        digest = hashlib.blake2b("\x1f".join(values).encode(), digest_size=8).digest()
        out[row] = int.from_bytes(digest, "little")
    return out


def resolve_home(home: str | os.PathLike[str] | None = None) -> str:
    """The storage root: the argument, else `LOOKBENCH_HOME`, else `./lookbench-data`."""
    value = str(home) if home is not None else os.environ.get("LOOKBENCH_HOME", DEFAULT_HOME)
    if "://" in value:
        return value.rstrip("/")
    return str(Path(value).expanduser().resolve())


def is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


@contextmanager
def atomic_local_file(path: str) -> Iterator[BinaryIO]:
    """A binary handle whose bytes appear at the local `path` whole, durably, or not at all: a
    temp file beside it, fsynced, renamed over `path`, and the folder fsynced (the rename too
    survives a crash). Any exception removes the temp file and propagates."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as handle:
            yield handle
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


def atomic_write_bytes(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Write `data` to `path` so that readers see nothing or all of it."""
    if isinstance(fs, fsspec.implementations.local.LocalFileSystem):
        with atomic_local_file(path) as handle:
            handle.write(data)
    else:
        # One PUT is atomic on object stores: the object exists whole or not at all.
        fs.pipe_file(path, data)


def check_footer(metadata: pq.FileMetaData) -> None:
    """Raise `ValueError` when a Parquet footer disagrees with the Arrow schema stored inside it.

    Page checksums cover the pages only. A flipped byte in a column name of the footer would
    otherwise read as a column of nulls (the name no longer matches the record's), silently; the
    writer stored the same schema a second time (`ARROW:schema`), so the two must agree. A file
    without it (another writer's) is not checked."""
    stored = (metadata.metadata or {}).get(b"ARROW:schema")
    if stored is None:
        return
    try:
        expected = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored, validate=True)))
    except (pa.ArrowException, binascii.Error) as exc:
        raise ValueError(f"the stored Arrow schema is damaged ({type(exc).__name__})") from None
    if not metadata.schema.to_arrow_schema().equals(expected, check_metadata=False):
        raise ValueError("the footer's schema disagrees with its stored Arrow schema (damaged footer)")
    # A flipped row count would read as fewer (or more) rows, silently: the footer holds the count
    # twice (per row group and for the file), so the two must agree. (Column chunk metadata is not
    # consulted: pyarrow aborts the process on some damaged chunk statistics.)
    counts = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    if sum(counts) != metadata.num_rows:
        raise ValueError("the footer's row counts disagree (damaged footer)")


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **PARQUET_OPTIONS)
    return sink.getvalue()


class Lake:
    """A storage root holding image bytes and the pipeline's tables."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        *,
        create: bool = True,
    ):
        """`create=False` (read commands): a root that does not exist raises `LakeNotFound`
        instead of being created, so a mistyped `--home` is named, not made."""
        self.home = resolve_home(home)
        options = dict(storage_options or {})
        if not is_local(self.home):
            # Object-store clients (s3fs, gcsfs) cache listings forever by default, so a
            # long-lived reader would never see fragments or manifests another process
            # committed. The lake decides by listing: it must always be current.
            options.setdefault("use_listings_cache", False)
        self.fs, self.root = fsspec.core.url_to_fs(self.home, **options)
        if not create and not self.fs.isdir(self.root):
            raise LakeNotFound(
                f"no lake at {self.home} (--home, else $LOOKBENCH_HOME, else ./lookbench-data): "
                "check the path; a lake is created by the commands that write one (refresh)"
            )
        self.fs.makedirs(self.root, exist_ok=True)
        self._key_cache: dict[str, tuple[frozenset[str], set[tuple[Any, ...]]]] = {}
        # fragment path -> its sorted key digests (fragments are immutable, so are their segments)
        self._key_segments: dict[str, np.ndarray] = {}
        self.reads = ReadStats()
        # Files under tables/ that are not committed fragments: path → reason (reported once).
        self.skipped: dict[str, str] = {}
        self._checked: set[str] = set()

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

    def get_verified_image(self, sha256: str) -> bytes:
        """The image's bytes, re-hashed against their content-address name (X13): what goes into
        a release is exactly what was stored. Raises `ImageCorrupt` when they differ."""
        data = self.get_image(sha256)
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise ImageCorrupt(sha256, self.image_path(sha256), actual)
        return data

    # ------------------------------------------------------------------ tables
    def table_dir(self, table: str) -> str:
        if table not in TABLES:
            raise LakeError(f"unknown table {table!r}; tables are {sorted(TABLES)}")
        return self.path("tables", table)

    def fragments(self, table: str) -> list[str]:
        """Committed fragments of a table, in name order.

        Only names `append` writes (`part-<24 hex>.parquet`) count; temp files are ignored
        silently, anything else foreign is skipped and reported (`skipped`, a warning), and so
        is a fragment found unreadable by `read`."""
        directory = self.table_dir(table)
        try:
            # One listing request; an `exists` check first would cost two more on object stores.
            listed = self.fs.ls(directory, detail=False)
        except FileNotFoundError:
            return []
        kept = []
        for path in sorted(listed):
            name = os.path.basename(path)
            if name.startswith("."):
                continue  # a killed writer's temp file: `reconcile()` deletes it
            if not FRAGMENT_NAME.fullmatch(name):
                self._skip(path, "not a fragment written by the lake (foreign name)")
            elif path not in self.skipped or table in COMPLIANCE_TABLES:
                # A compliance fragment an earlier query skipped is read (and refused) again.
                kept.append(path)
        return kept

    def _skip(self, path: str, reason: str) -> None:
        if path not in self.skipped:
            self.skipped[path] = reason
            logger.warning("lake %s: skipped %s: %s", self.home, path, reason)

    def read(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        *,
        where: pads.Expression | None = None,
        fragments: Sequence[str] | None = None,
    ) -> pa.Table:
        """The whole table (all committed fragments) with the record's current schema.

        `where` keeps the rows matching it (fragments and row groups whose statistics exclude it
        are skipped); `fragments` reads only those committed fragments (paths from `fragments()`).

        One foreign, footer-less, mistyped or corrupt file (page checksums, `check_footer`)
        never breaks the table: when the fragments cannot be read together, each is tried alone
        and those that fail are skipped and reported (`skipped`). Except in a compliance table
        (`COMPLIANCE_TABLES`): there an unreadable fragment raises `FragmentError`."""
        schema = arrow_schema_of(TABLES[table])
        files = self.fragments(table) if fragments is None else list(fragments)
        keys = TABLES[table].__key__
        try:
            out = self._read_files(files, schema, columns, keys, where)
        except (pa.ArrowException, OSError, ValueError):
            good = []
            for path in files:
                try:
                    self._read_files([path], schema, columns, keys, where)
                except (pa.ArrowException, OSError, ValueError) as exc:
                    self._unreadable(table, path, exc)
                else:
                    good.append(path)
            files = good
            out = self._read_files(good, schema, columns, keys, where)
        self.reads.fragments[table] += len(files)
        self.reads.rows[table] += out.num_rows
        return out

    def _unreadable(self, table: str, path: str, exc: Exception) -> None:
        """A committed fragment that cannot be read: refused in a compliance table, else skipped."""
        cause = f"{type(exc).__name__}: {str(exc)[:200]}"
        if table in COMPLIANCE_TABLES:
            raise FragmentError(table, path, cause) from exc
        self._skip(path, f"unreadable fragment ({cause})")

    def _read_files(
        self,
        files: list[str],
        schema: pa.Schema,
        columns: Sequence[str] | None,
        keys: Sequence[str] = (),
        where: pads.Expression | None = None,
    ) -> pa.Table:
        if not files:
            empty = schema.empty_table()
            return empty.select(list(columns)) if columns else empty
        if self.local:
            for path in files:
                self._check_keys(path, schema, keys, lambda p=path: pq.read_metadata(p))
            dataset = pads.dataset(files, schema=schema, filesystem=self.fs, format=PARQUET_FORMAT)
        else:
            # Object stores: one GET per fragment, issued concurrently by the client, instead of
            # pyarrow's per-file metadata request and ranged reads through fsspec (without a
            # listings cache those cost several round trips per fragment).
            blobs = self.fs.cat(files)
            for path in files:
                self._check_keys(
                    path, schema, keys, lambda p=path: pq.read_metadata(pa.BufferReader(blobs[p]))
                )
            parquet = PARQUET_FORMAT
            fragments = [parquet.make_fragment(pa.BufferReader(blobs[path])) for path in files]
            dataset = pads.FileSystemDataset(fragments, schema=schema, format=parquet)
        return dataset.to_table(columns=list(columns) if columns else None, filter=where)

    def _check_keys(self, path: str, schema: pa.Schema, keys: Sequence[str], read_metadata: Any) -> None:
        """A fragment must carry the table's key columns with their types (a foreign file may not)
        and a footer that agrees with itself (`check_footer`); checked once per fragment
        (fragments are immutable), raising `ValueError` otherwise."""
        if path in self._checked:
            return
        metadata = read_metadata()
        check_footer(metadata)
        found = metadata.schema.to_arrow_schema()
        for name in keys:
            index = found.get_field_index(name)
            if index < 0 or found.field(index).type != schema.field(name).type:
                raise ValueError(f"key column {name!r} is missing or not {schema.field(name).type}")
        self._checked.add(path)

    def dataset(self, table: str) -> pads.Dataset:
        """A lazy dataset over the committed fragments (queries); unreadable ones are skipped and
        reported as by `read`, after reading each footer and key columns once."""
        schema = arrow_schema_of(TABLES[table])
        keys = TABLES[table].__key__
        files = []
        for path in self.fragments(table):
            try:
                with self.fs.open(path, "rb") as handle:
                    self._check_keys(path, schema, keys, lambda h=handle: pq.read_metadata(h))
            except (pa.ArrowException, OSError, ValueError) as exc:
                self._skip(path, f"unreadable fragment ({type(exc).__name__}: {str(exc)[:200]})")
            else:
                files.append(path)
        if not files:
            return pads.dataset(schema.empty_table())
        return pads.dataset(files, schema=schema, filesystem=self.fs, format=PARQUET_FORMAT)

    def sql(self, query: str, tables: Sequence[str], params: Sequence[Any] = ()) -> pa.Table:
        """Run a DuckDB query over these tables (registered under their names as Arrow datasets,
        so projections and filters reach the Parquet scan and no table is loaded whole); the
        fragments scanned and the rows returned are counted in `reads`."""
        import duckdb

        with duckdb.connect() as con:
            for table in tables:
                dataset = self.dataset(table)
                if isinstance(dataset, pads.FileSystemDataset):
                    self.reads.fragments[table] += len(dataset.files)
                con.register(table, dataset)
            out = con.sql(query, params=list(params)).to_arrow_table()
        self.reads.rows["sql"] += out.num_rows
        return out

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

    # ------------------------------------------------------------------ the key index
    def key_index_dir(self, table: str) -> str:
        return self.path("derived", "keys", table)

    def _segment_path(self, table: str, fragment: str) -> str:
        return f"{self.key_index_dir(table)}/{os.path.basename(fragment)}.keys"

    def _write_segment(self, table: str, fragment: str, digests: np.ndarray) -> None:
        self.fs.makedirs(self.key_index_dir(table), exist_ok=True)
        data = np.sort(digests).astype("<u8").tobytes()
        atomic_write_bytes(self.fs, self._segment_path(table, fragment), data)
        self._key_segments[fragment] = np.frombuffer(data, dtype="<u8")

    def _segments(self, table: str, files: Sequence[str]) -> dict[str, np.ndarray]:
        """fragment -> its sorted key digests. A segment that is missing (a writer killed between
        the fragment and its segment, a lake from before the index) or of the wrong length is
        made again from the fragment's key columns: the index follows the fragments, never the
        other way round."""
        cls = TABLES[table]
        try:
            listed = {os.path.basename(p) for p in self.fs.ls(self.key_index_dir(table), detail=False)}
        except FileNotFoundError:
            listed = set()
        stored = {
            path: self._segment_path(table, path)
            for path in files
            if path not in self._key_segments and f"{os.path.basename(path)}.keys" in listed
        }
        # One request for all of them (object stores issue the GETs concurrently).
        blobs = self.fs.cat(list(stored.values())) if stored else {}
        for path, where in stored.items():
            data = blobs.get(where) or blobs.get(where.split("://", 1)[-1]) or b""
            self.reads.key_segments[table] += 1
            if data and len(data) % 8 == 0:
                self._key_segments[path] = np.frombuffer(data, dtype="<u8")
        out: dict[str, np.ndarray] = {}
        for path in files:
            segment = self._key_segments.get(path)
            if segment is None:
                keys = self.read(table, columns=list(cls.__key__), fragments=[path])
                if path in self.skipped:  # unreadable: `read` skipped and reported it
                    continue
                self._write_segment(table, path, key_digests(keys))
                segment = self._key_segments[path]
            out[path] = segment
        return out

    def key_digest_index(self, table: str) -> np.ndarray:
        """The sorted 64-bit key digests of every stored row of `table` (its key index: 8 bytes a
        row, read from derived/keys, made again for a fragment that lacks its segment)."""
        segments = self._segments(table, self.fragments(table))
        if not segments:
            return np.empty(0, dtype=np.uint64)
        return np.sort(np.concatenate(list(segments.values())).astype(np.uint64))

    def stored_keys(
        self, table: str, candidates: pa.Table, files: Sequence[str] | None = None
    ) -> set[tuple[Any, ...]]:
        """The keys among `candidates` (a table of the key columns) that the table already holds.

        Looked up in the key index: only fragments whose digests match a candidate are read
        (their key columns), so an append of new keys reads no rows of the table at all."""
        cls = TABLES[table]
        names = list(cls.__key__)
        found: set[tuple[Any, ...]] = set()
        if candidates.num_rows == 0:
            return found
        if table in COMPLIANCE_TABLES:
            # A compliance table fails closed (X10): every fragment is read, so a damaged one
            # stops the append, as it stops every reader. These tables are small.
            want = set(zip(*(candidates.column(n).to_pylist() for n in names), strict=True))
            return want & self.keys(table)
        wanted = key_digests(candidates)
        wanted_set = np.unique(wanted)
        want_keys = set(zip(*(candidates.column(n).to_pylist() for n in names), strict=True))
        listed = self.fragments(table) if files is None else files
        for path, segment in self._segments(table, listed).items():
            if not len(segment):
                continue
            pos = np.searchsorted(segment, wanted_set).clip(0, len(segment) - 1)
            if not bool((segment[pos] == wanted_set).any()):
                continue
            # A digest match: confirm exactly (two keys may share a 64-bit digest).
            stored = self.read(table, columns=names, fragments=[path])
            for key in zip(*(stored.column(n).to_pylist() for n in names), strict=True):
                if key in want_keys:
                    found.add(key)
        return found

    def append(self, records: Iterable[Record]) -> int:
        """Append records (one table per call) that are not stored yet; returns rows written."""
        batch = list(records)
        if not batch:
            return 0
        cls = type(batch[0])
        if any(type(r) is not cls for r in batch):
            raise LakeError("append takes records of one table per call")
        table = cls.__table__
        names = list(cls.__key__)
        unique: list[Record] = []
        seen: set[tuple[Any, ...]] = set()
        for record in batch:
            key = record.key()
            if key in seen:
                continue
            seen.add(key)
            unique.append(record)
        before = frozenset(self.fragments(table))
        candidates = to_arrow(unique, cls).select(names)
        existing = self.stored_keys(table, candidates, sorted(before))
        # Compare as the stored rows spell the keys (Arrow's types), as `stored_keys` found them.
        spelled = list(zip(*(candidates.column(n).to_pylist() for n in names), strict=True))
        fresh = [r for r, k in zip(unique, spelled, strict=True) if k not in existing]
        if not fresh:
            return 0
        arrow = to_arrow(fresh, cls)
        written = {r.key() for r in fresh}
        # The fragment name derives from its keys: a retried write of the same rows
        # lands on the same name instead of a second copy.
        digest = hashlib.sha256("\n".join(sorted(repr(k) for k in written)).encode()).hexdigest()[:24]
        path = self.path("tables", table, f"part-{digest}.parquet")
        self.fs.makedirs(self.table_dir(table), exist_ok=True)
        atomic_write_bytes(self.fs, path, parquet_bytes(arrow))
        # The key segment after the fragment: a kill between the two leaves a fragment without a
        # segment, which the next lookup makes again from the fragment.
        self._write_segment(table, path, key_digests(arrow.select(names)))
        cached = self._key_cache.get(table)
        if cached is not None and cached[0] == before:
            self._key_cache[table] = (frozenset(self.fragments(table)), cached[1] | written)
        return len(fresh)

    def reconcile(self) -> list[str]:
        """Delete temp files left by killed writers; returns what was removed.

        Safe only when no writer is running (the flow calls it at start, under its lock).
        """
        removed: list[str] = []
        for base in ("tables", "images", "derived"):
            top = self.path(base)
            if not self.fs.exists(top):
                continue
            for path in self.fs.find(top):
                if os.path.basename(path).startswith(".tmp-"):
                    self.fs.rm_file(path)
                    removed.append(path)
        return removed

    @contextmanager
    def writer_lock(self, name: str = "lake", *, lease_s: float | None = None) -> Iterator[None]:
        """The one writer lock of this lake, whoever writes (X6).

        Every writer — the flows and each CLI writer (`release build`, `dedup`, `annotate`,
        `generate`, `evaluate`, `takedown add`) — takes the same lock `locks/writer.lock`; `name` says who
        holds it, and a refused writer's error names the holder (what, pid, host, since).

        Local lakes: an `flock`, released by the kernel when the holder dies; the holder is
        written into the file, so a later writer that finds a holder record no one released
        reports the takeover. Object stores: a lock object created only if absent (a
        conditional PUT) carrying a lease that a heartbeat thread renews (a conditional PUT on
        the holder's own ETag); once a killed holder's lease has expired, a later writer takes
        the lock over with a conditional PUT on the expired ETag, so of two takers one wins.
        Takeovers are logged and recorded as a `rejections` row (stage `lock`, reason
        `lock_taken_over`).
        """
        if self.home in _HELD_LOCKS:  # taken for the whole process (`process_writer_lock`)
            yield
            return
        lease = float(lease_s if lease_s is not None else LOCK_LEASE_S)
        if not self.local:
            yield from self._object_store_lock(name, lease)
            return
        import fcntl

        lock_dir = self.path("locks")
        os.makedirs(lock_dir, exist_ok=True)
        # "a+": opening must not truncate the holder record another process wrote.
        with open(os.path.join(lock_dir, WRITER_LOCK), "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                handle.seek(0)
                raise LakeError(
                    f"another lookbench-live writer holds the writer lock of {self.home}: "
                    f"{_describe_holder(handle.read())}; wait for it to finish"
                ) from exc
            try:
                handle.seek(0)
                previous = handle.read().strip()
                if previous:
                    # The kernel freed the lock of a holder that never released it: it was killed.
                    self._record_takeover(os.path.join(lock_dir, WRITER_LOCK), previous)
                handle.seek(0)
                handle.truncate()
                handle.write(json.dumps(_holder(name, lease)))
                handle.flush()
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                handle.flush()
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextmanager
    def process_writer_lock(self, name: str) -> Iterator[None]:
        """The writer lock, held for this process: `writer_lock` inside it passes. `refresh` and
        `backfill` take it before Prefect starts, so a second run is refused at once, not after
        its flow started; the flow's own `writer_lock` then finds it held."""
        with self.writer_lock(name):
            _HELD_LOCKS.add(self.home)
            try:
                yield
            finally:
                _HELD_LOCKS.discard(self.home)

    def _record_takeover(self, where: str, previous: str) -> None:
        """A holder that never released the lock was killed (O3: no exit hook ran): record the
        takeover, then sweep the temp files its writes left, now that no writer can be running.
        Staging folders of killed release builds are the release builder's to undo
        (`reconcile_releases`); unfinished stages have no ledger marker and simply run again."""
        detail = f"took over the writer lock from {_describe_holder(previous)}"
        logger.warning("lake %s: %s", self.home, detail)
        self.append(
            [Rejection(stage="lock", item=f"{where}@{_utc_now()}", reason="lock_taken_over", detail=detail)]
        )
        removed = self.reconcile()
        if removed:
            logger.warning("lake %s: removed %d temp files of the killed writer", self.home, len(removed))

    def _object_store_lock(self, name: str, lease: float) -> Iterator[None]:
        import threading

        path = self.path("locks", WRITER_LOCK)
        where = self.url("locks", WRITER_LOCK)
        bucket, key, _ = self.fs.split_path(path)
        holder = _holder(name, lease)
        try:
            # A conditional PUT (If-None-Match: *): of two writers racing, exactly one succeeds.
            etag = self.fs.pipe_file(path, json.dumps(holder).encode(), mode="create")["ETag"]
            previous = None
        except (FileExistsError, OSError) as exc:
            if not _precondition_failed(exc):
                raise
            etag, previous = self._take_over_expired(path, where, holder)
        if previous is not None:
            self._record_takeover(where, previous)
        state = {"etag": etag, "lost": ""}
        stop = threading.Event()

        def heartbeat() -> None:
            while not stop.wait(lease / 3):
                try:
                    renewed = {**holder, "expires_at": _utc_now(lease)}
                    state["etag"] = self.fs.pipe_file(
                        path, json.dumps(renewed).encode(), IfMatch=state["etag"]
                    )["ETag"]
                except Exception as exc:  # the lock was taken over, or the store is unreachable
                    if _precondition_failed(exc):
                        state["lost"] = "another writer took the lock over"
                        logger.error("lake %s: lost the writer lock (%s)", self.home, state["lost"])
                        return
                    logger.warning("lake %s: could not renew the writer lock: %s", self.home, exc)

        beat = threading.Thread(target=heartbeat, name="lake-lock-heartbeat", daemon=True)
        beat.start()
        try:
            yield
        finally:
            stop.set()
            beat.join()
            if not state["lost"]:
                try:
                    self.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=state["etag"])
                except Exception as exc:
                    if not _precondition_failed(exc):
                        raise
            self.fs.invalidate_cache(path)
        if state["lost"]:
            raise LakeError(f"the writer lock of {self.home} was lost while held ({state['lost']}); rerun")

    def _take_over_expired(self, path: str, where: str, holder: dict[str, Any]) -> tuple[str, str]:
        """Replace an expired lock object (conditional on its ETag); a live one refuses."""
        self.fs.invalidate_cache(path)
        try:
            info = self.fs.info(path)
            current = self.fs.cat_file(path).decode("utf-8", "replace")
        except FileNotFoundError:
            current, info = "", {}
        refused = LakeError(
            f"another lookbench-live writer holds the writer lock of {self.home} ({where}): "
            f"{_describe_holder(current)}; wait for it to finish (a killed holder's lock is taken over once "
            "its lease expires)"
        )
        try:
            expires = parse_moment(json.loads(current)["expires_at"])
        except (ValueError, KeyError, TypeError):
            expires = None  # unreadable: treat as expired only if it is older than a lease
        if expires is not None and expires > dt.datetime.now(dt.UTC):
            raise refused
        try:
            out = (
                self.fs.pipe_file(path, json.dumps(holder).encode(), IfMatch=info.get("ETag", ""))
                if info
                else self.fs.pipe_file(path, json.dumps(holder).encode(), mode="create")
            )
        except (FileExistsError, OSError) as exc:
            if _precondition_failed(exc):
                raise refused from exc  # another writer took it over first
            raise
        return out["ETag"], current


LOCK_LEASE_S = 120.0
FRAGMENT_NAME = re.compile(r"part-[0-9a-f]{24}\.parquet")
WRITER_LOCK = "writer.lock"
_HELD_LOCKS: set[str] = set()  # lake homes whose writer lock this process holds


def _utc_now(plus_s: float = 0.0) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=plus_s)).isoformat()


def _holder(name: str, lease: float) -> dict[str, Any]:
    import socket

    return {
        "name": name,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "id": uuid.uuid4().hex,
        "since": _utc_now(),
        "expires_at": _utc_now(lease),
    }


def _describe_holder(text: str) -> str:
    try:
        h = json.loads(text)
        return f"{h['name']} (pid {h['pid']} on {h['host']}, since {h['since']})"
    except (ValueError, KeyError, TypeError):
        return "an unknown holder"


def _precondition_failed(exc: BaseException) -> bool:
    """Whether a conditional write (If-None-Match: *) lost because the key exists.

    s3fs raises `FileExistsError` when S3's error names the If-None-Match condition; otherwise
    (a multipart completion, a store that leaves out `Condition`) an `OSError` whose cause is
    botocore's `ClientError`, whose response carries the code and the HTTP status (412)."""
    if isinstance(exc, FileExistsError):
        return True
    for error in (exc, exc.__cause__):
        response = getattr(error, "response", None) if _is_client_error(error) else None
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if response.get("Error", {}).get("Code") == "PreconditionFailed" or status == 412:
                return True
    return False


def _is_client_error(error: BaseException | None) -> bool:
    try:  # botocore comes with s3fs (the `s3` extra): without it no S3 error can occur
        from botocore.exceptions import ClientError
    except ImportError:
        return False
    return isinstance(error, ClientError)
