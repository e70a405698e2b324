"""The dedup index: what `run_dedup` needs of the lake's history, persisted and caught up per run.

A month's dedup must compare its images with every image kept earlier (and every released one,
from the released-image index, warehouse/released.py), but it must not read the whole `images`
and `dedup_decisions` tables to find them. `derived/dedup_index.parquet` holds, per sha256:

- images kept earlier and images not decided yet: owners (with their first-seen times), sources,
  first_seen_at, largest pixel count and the hashes of the current method, all as
  `collect_images` over the whole table would give them;
- images dropped earlier: only the sha256 and the decision (a later copy of the same bytes gets
  no new decision, so nothing else about them is needed);

and, in its footer, the fragments of `images` and `dedup_decisions` it has read. `catch_up`
reads only the fragments written since (the window's images, the last run's decisions) and
merges them, so the state is a function of the set of rows read, whatever the order. The file
is written atomically; a missing one, one of another format, or one that names a fragment no
longer in the lake is rebuilt from the lake's tables (deterministically: the same state, so a
rerun after a kill gives the same decisions and the same release).

The search over it is exact: `run_dedup` compares every pending image with every reference by
`range_pairs` (dedup/index.py), whose multi-index engine probes each part of the hash, so a
near copy whose leading bits differ is still found.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lookbench_live.dedup.index import is_hash
from lookbench_live.schema.hashing import HASH_METHOD, ImageHashes
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes, parquet_bytes

log = logging.getLogger(__name__)

FORMAT = "1"
INDEX_PARTS = ("derived", "dedup_index.parquet")
IMAGE_COLUMNS = [
    "owner_kind",
    "owner_id",
    "source",
    "status",
    "sha256",
    "width",
    "height",
    "phash",
    "phash_mirror",
    "dhash",
    "hash_method",
    "first_seen_at",
]
FAR = dt.datetime.max.replace(tzinfo=dt.UTC)
_TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        ("sha256", pa.string()),
        ("decision", pa.string()),  # kept | dropped | null (not decided yet)
        ("run_id", pa.string()),
        ("first_seen_at", _TS),
        ("pixels", pa.int64()),
        ("owner_seen", pa.list_(_TS)),
        ("owners", pa.list_(pa.string())),
        ("sources", pa.list_(pa.string())),
        ("phash", pa.string()),
        ("phash_mirror", pa.string()),
        ("dhash", pa.string()),
        ("hash_method", pa.string()),
    ]
)


@dataclass(slots=True)
class Image:
    """One unique sha256 as the `images` table describes it."""

    sha256: str
    first_seen_at: dt.datetime = FAR
    pixels: int = 0
    owners: set[tuple[dt.datetime, str]] = field(default_factory=set)  # (first_seen_at, "kind:id")
    sources: set[str] = field(default_factory=set)
    hashes: ImageHashes | None = None

    def rank(self) -> tuple[dt.datetime, int, str]:
        return (self.first_seen_at, -self.pixels, self.sha256)

    def owner_set(self) -> frozenset[str]:
        return frozenset(o for _, o in self.owners)

    def canonical_owner(self) -> str | None:
        return min(self.owners)[1] if self.owners else None

    def merge(self, row: dict[str, Any]) -> None:
        """Add one `ok` row of the `images` table."""
        seen = row["first_seen_at"] or FAR
        self.first_seen_at = min(self.first_seen_at, seen)
        self.pixels = max(self.pixels, (row["width"] or 0) * (row["height"] or 0))
        self.owners.add((seen, f"{row['owner_kind']}:{row['owner_id']}"))
        if row["source"]:
            self.sources.add(row["source"])
        stored = ImageHashes(
            phash=(row["phash"] or "").lower(),
            phash_mirror=(row["phash_mirror"] or "").lower(),
            dhash=(row["dhash"] or "").lower(),
            method=row["hash_method"] or "",
        )
        if hashes_ok(stored):
            self.hashes = stored


def hashes_ok(h: ImageHashes | None) -> bool:
    return (
        h is not None
        and h.method == HASH_METHOD
        and is_hash(h.phash)
        and is_hash(h.phash_mirror)
        and (h.dhash is None or is_hash(h.dhash))
    )


@dataclass(slots=True)
class DedupHistory:
    """The persisted state; `images` holds kept and undecided images, `decided` every decision."""

    images: dict[str, Image] = field(default_factory=dict)
    decided: dict[str, tuple[str, str]] = field(default_factory=dict)  # sha -> (decision, run_id)
    consumed: dict[str, list[str]] = field(default_factory=lambda: {"images": [], "dedup_decisions": []})
    rows_read: int = 0  # rows of the lake's tables this object read (catch-ups)

    def pending(self) -> list[Image]:
        """Images with no decision, in canonical order."""
        return sorted((img for sha, img in self.images.items() if sha not in self.decided), key=Image.rank)

    def kept_earlier(self) -> dict[str, str]:
        return {sha: run for sha, (decision, run) in self.decided.items() if decision == "kept"}

    # ------------------------------------------------------------------ catching up
    def catch_up(self, lake: Lake) -> bool:
        """Read the fragments written since the last catch-up; returns whether anything changed."""
        current = {table: lake.fragments(table) for table in self.consumed}
        names = {table: {_name(p) for p in paths} for table, paths in current.items()}
        if any(not set(done) <= names[table] for table, done in self.consumed.items()):
            # A fragment read earlier is gone (moved out by hand, or now unreadable): start over.
            log.warning(
                "lake %s: the dedup index names fragments no longer in the lake; rebuilding", lake.home
            )
            self.images, self.decided = {}, {}
            self.consumed = {table: [] for table in self.consumed}
        changed = False
        for table in ("images", "dedup_decisions"):
            done = set(self.consumed[table])
            new = [p for p in current[table] if _name(p) not in done]
            if not new:
                continue
            changed = True
            if table == "images":
                rows = lake.read(
                    table, columns=IMAGE_COLUMNS, where=pc.field("status") == "ok", fragments=new
                )
                self._add_images(rows)
            else:
                rows = lake.read(table, columns=["sha256", "decision", "run_id"], fragments=new)
                self._add_decisions(rows)
            self.rows_read += rows.num_rows
            # A fragment the read skipped (unreadable) is not consumed: it is tried again next time.
            self.consumed[table] = sorted(done | {_name(p) for p in new if p not in lake.skipped})
        return changed

    def _add_images(self, table: pa.Table) -> None:
        for batch in table.to_batches(max_chunksize=8192):
            for row in batch.to_pylist():
                sha = row["sha256"]
                if not sha or self.decided.get(sha, ("",))[0] == "dropped":
                    continue
                image = self.images.get(sha)
                if image is None:
                    image = self.images[sha] = Image(sha256=sha)
                image.merge(row)

    def _add_decisions(self, table: pa.Table) -> None:
        for sha, decision, run_id in zip(
            *(table.column(c).to_pylist() for c in ("sha256", "decision", "run_id")), strict=True
        ):
            self.decided[sha] = (decision, run_id)
            if decision == "dropped":
                self.images.pop(sha, None)

    # ------------------------------------------------------------------ persistence
    def to_table(self) -> pa.Table:
        shas = sorted(set(self.images) | set(self.decided))
        columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
        for sha in shas:
            decision, run_id = self.decided.get(sha, (None, None))
            image = self.images.get(sha)
            owners = sorted(image.owners) if image else []
            hashes = image.hashes if image else None
            values = {
                "sha256": sha,
                "decision": decision,
                "run_id": run_id,
                "first_seen_at": image.first_seen_at if image else None,
                "pixels": image.pixels if image else None,
                "owner_seen": [s for s, _ in owners] if image else None,
                "owners": [o for _, o in owners] if image else None,
                "sources": sorted(image.sources) if image else None,
                "phash": hashes.phash if hashes else None,
                "phash_mirror": hashes.phash_mirror if hashes else None,
                "dhash": hashes.dhash if hashes else None,
                "hash_method": hashes.method if hashes else None,
            }
            for name, value in values.items():
                columns[name].append(value)
        meta = {"format": FORMAT, "hash_method": HASH_METHOD, "consumed": json.dumps(self.consumed)}
        return pa.table(columns, schema=SCHEMA).replace_schema_metadata(meta)

    @staticmethod
    def from_table(table: pa.Table) -> DedupHistory:
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        state = DedupHistory(consumed=json.loads(meta["consumed"]))
        for row in _pylist(table):
            sha = row["sha256"]
            if row["decision"]:
                state.decided[sha] = (row["decision"], row["run_id"])
            if row["owners"] is None:
                continue
            image = state.images[sha] = Image(
                sha256=sha,
                first_seen_at=row["first_seen_at"],
                pixels=row["pixels"],
                owners=set(zip(row["owner_seen"], row["owners"], strict=True)),
                sources=set(row["sources"]),
            )
            hashes = ImageHashes(
                phash=row["phash"] or "",
                phash_mirror=row["phash_mirror"] or "",
                dhash=row["dhash"] or "",
                method=row["hash_method"] or "",
            )
            image.hashes = hashes if hashes_ok(hashes) else None
        return state


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _pylist(table: pa.Table) -> Iterable[dict[str, Any]]:
    for batch in table.to_batches(max_chunksize=8192):
        yield from batch.to_pylist()


def index_path(lake: Lake) -> str:
    return lake.path(*INDEX_PARTS)


def load(lake: Lake) -> DedupHistory:
    """The persisted index, or an empty one (to be caught up from the whole lake) when it is
    missing, unreadable, of another format or of another hash method."""
    path = index_path(lake)
    try:
        with lake.fs.open(path, "rb") as handle:
            table = pq.read_table(handle)
    except FileNotFoundError:
        return DedupHistory()
    except (pa.ArrowException, OSError) as exc:
        log.warning(
            "lake %s: the dedup index is unreadable (%s); rebuilding it from the tables", lake.home, exc
        )
        return DedupHistory()
    meta = table.schema.metadata or {}
    if meta.get(b"format") != FORMAT.encode() or meta.get(b"hash_method") != HASH_METHOD.encode():
        return DedupHistory()
    try:
        return DedupHistory.from_table(table)
    except (KeyError, ValueError, TypeError) as exc:
        log.warning("lake %s: the dedup index is damaged (%s); rebuilding it from the tables", lake.home, exc)
        return DedupHistory()


def save(lake: Lake, state: DedupHistory) -> None:
    """Write the index whole or not at all (a killed write leaves the previous one)."""
    lake.fs.makedirs(lake.path(INDEX_PARTS[0]), exist_ok=True)
    atomic_write_bytes(lake.fs, index_path(lake), parquet_bytes(state.to_table()))


def caught_up(lake: Lake) -> DedupHistory:
    """The index, caught up with the lake and saved when it changed."""
    state = load(lake)
    if state.catch_up(lake):
        save(lake, state)
    return state
