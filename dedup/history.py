"""The dedup index: what `run_dedup` needs of the lake's history, persisted, append-only.

A month's dedup must compare its images with every image kept earlier (and every released one,
from the released-image index, warehouse/released.py), but it must neither read the whole
`images` and `dedup_decisions` tables nor hold the history as Python objects. The index lives in
`derived/dedup_index/`:

- `manifest.json` (written last, atomically): the format, the hash method, the shards in order,
  the pending file, and the fragments of `images` and `dedup_decisions` read so far;
- one immutable shard per catch-up that found decisions or rows of decided images
  (`shard-<n>-<digest>.rows.arrow` and `.bands.arrow`, Arrow IPC files, memory-mapped on a
  local lake): one row per sha256, sorted: a decision (kept or dropped, by which run), and for
  kept images the owners (with first-seen times), sources, earliest `first_seen_at`, largest
  pixel count and the hashes of the current method as unsigned 64-bit columns; a row with no
  decision adds the owners of a later `images` row to an image kept in an earlier shard. The
  bands file is the multi-index of its pHashes and mirrored pHashes, already sorted
  (dedup/bands.py);
- `pending-<digest>.arrow`: the images not decided yet (this month's), merged per sha256.

A sha256's state is the merge of its rows over all shards (owners and sources united, earliest
first-seen, largest size), as `collect_images` over the whole table would give it. `catch_up`
reads only the fragments written since the last one, as before; what a run loads of the shards
is their columnar key, hash and band arrays (tens of bytes per kept image, no Python object per
image); the details of a kept image are read only when a pending image is found near it.

Consistency: a shard's name carries its content's digest and the manifest names what counts,
so a run killed before the manifest leaves the previous index (its stray files are deleted by
the next save), and the rerun writes the same shard. A missing, unreadable or damaged manifest,
shard or pending file, one of another format or hash method, or one that names a fragment no
longer in the lake, is rebuilt from the lake's tables (deterministically: the same state, so a
rerun after a kill gives the same decisions and the same release).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live.dedup import bands
from lookbench_live.dedup.index import is_hash
from lookbench_live.schema.hashing import HASH_METHOD, ImageHashes
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes

log = logging.getLogger(__name__)

FORMAT = "2"
INDEX_DIR = ("derived", "dedup_index")
LEGACY_INDEX = ("derived", "dedup_index.parquet")  # format 1: one file, loaded whole
MANIFEST = "manifest.json"
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
        ("decision", pa.string()),  # kept | dropped | null (owners added to an earlier kept image)
        ("run_id", pa.string()),
        ("first_seen_at", _TS),
        ("pixels", pa.int64()),
        ("owner_seen", pa.list_(_TS)),
        ("owners", pa.list_(pa.string())),
        ("sources", pa.list_(pa.string())),
        ("hashed", pa.bool_()),  # phash and phash_mirror hold usable hashes of HASH_METHOD
        ("phash", pa.uint64()),
        ("phash_mirror", pa.uint64()),
        ("has_dhash", pa.bool_()),
        ("dhash", pa.uint64()),
    ]
)
BANDS_SCHEMA = pa.schema(
    [(f"{kind}{i}", pa.uint32()) for i in range(len(bands.PARTS)) for kind in ("key", "code")]
)
DETAIL_COLUMNS = ["sha256", "decision", "run_id", "first_seen_at", "pixels", "owner_seen", "owners",
                  "sources", "hashed", "phash", "phash_mirror", "has_dhash", "dhash"]  # fmt: skip


class IndexDamaged(ValueError):
    """A file the manifest names is missing, unreadable or not what it should be."""


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

    def absorb(self, other: Image) -> None:
        """Merge another state of the same sha256 (rows read elsewhere)."""
        self.first_seen_at = min(self.first_seen_at, other.first_seen_at)
        self.pixels = max(self.pixels, other.pixels)
        self.owners |= other.owners
        self.sources |= other.sources
        if other.hashes is not None:
            self.hashes = other.hashes


def hashes_ok(h: ImageHashes | None) -> bool:
    return (
        h is not None
        and h.method == HASH_METHOD
        and is_hash(h.phash)
        and is_hash(h.phash_mirror)
        and (h.dhash is None or is_hash(h.dhash))
    )


def _hex(value: int) -> str:
    return f"{value:016x}"


def _u64(text: str | None) -> int:
    return int(text, 16) if text else 0


# ---------------------------------------------------------------------- rows <-> images
def _rows(entries: list[tuple[str, str | None, str | None, Image | None]]) -> pa.Table:
    """Index rows, sorted by sha256: (sha, decision, run_id, image or None)."""
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for sha, decision, run_id, image in sorted(entries, key=lambda e: e[0]):
        owners = sorted(image.owners) if image else []
        hashes = image.hashes if image else None
        dhash = hashes.dhash if hashes else ""
        values = {
            "sha256": sha,
            "decision": decision,
            "run_id": run_id,
            "first_seen_at": image.first_seen_at if image else None,
            "pixels": image.pixels if image else None,
            "owner_seen": [s for s, _ in owners] if image else None,
            "owners": [o for _, o in owners] if image else None,
            "sources": sorted(image.sources) if image else None,
            "hashed": hashes is not None,
            "phash": _u64(hashes.phash) if hashes else 0,
            "phash_mirror": _u64(hashes.phash_mirror) if hashes else 0,
            "has_dhash": bool(dhash),
            "dhash": _u64(dhash) if dhash else 0,
        }
        for name, value in values.items():
            columns[name].append(value)
    return pa.table(columns, schema=SCHEMA)


def _image_of(row: dict[str, Any]) -> Image | None:
    """The image state one index row holds (None for a dropped image's row)."""
    if row["owners"] is None:
        return None
    image = Image(
        sha256=row["sha256"],
        first_seen_at=row["first_seen_at"],
        pixels=row["pixels"],
        owners=set(zip(row["owner_seen"], row["owners"], strict=True)),
        sources=set(row["sources"]),
    )
    if row["hashed"]:
        image.hashes = ImageHashes(
            phash=_hex(row["phash"]),
            phash_mirror=_hex(row["phash_mirror"]),
            dhash=_hex(row["dhash"]) if row["has_dhash"] else "",
            method=HASH_METHOD,
        )
    return image


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One array without a copy when the column is one chunk (as the index's files hold them):
    a memory-mapped column stays on its pages, read only where a run touches it."""
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def _numpy(column: pa.ChunkedArray | pa.Array, dtype: Any) -> np.ndarray:
    array = _array(column)
    if not len(array):
        return np.empty(0, dtype=dtype)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=dtype)


# ---------------------------------------------------------------------- one shard
@dataclass(slots=True)
class Shard:
    """One immutable shard: its rows (sorted by sha256) and its band arrays."""

    name: str
    rows: pa.Table
    bands: dict[str, np.ndarray]
    sha: pa.Array = field(init=False)
    phash: np.ndarray = field(init=False)
    mirror: np.ndarray = field(init=False)
    hashed: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.sha = _array(self.rows.column("sha256"))
        self.phash = _numpy(self.rows.column("phash"), np.uint64)
        self.mirror = _numpy(self.rows.column("phash_mirror"), np.uint64)
        self.hashed = _numpy(self.rows.column("hashed"), bool)

    def __len__(self) -> int:
        return self.rows.num_rows

    def find(self, shas: pa.Array) -> np.ndarray:
        """Row numbers of these sha256 in the shard."""
        if not len(shas) or not len(self):
            return np.empty(0, np.int64)
        return np.nonzero(_numpy(pc.is_in(self.sha, value_set=shas), bool))[0]

    @staticmethod
    def make(name: str, rows: pa.Table) -> tuple[Shard, bytes, bytes]:
        """A shard of these rows and the bytes of its two files."""
        phash = _numpy(rows.column("phash"), np.uint64)
        mirror = _numpy(rows.column("phash_mirror"), np.uint64)
        hashed = _numpy(rows.column("hashed"), bool)
        built = bands.build(phash, mirror, hashed)
        band_table = pa.table({n: built[n] for n in BANDS_SCHEMA.names}, schema=BANDS_SCHEMA)
        return Shard(name, rows, built), _ipc_bytes(rows), _ipc_bytes(band_table)


def _read_ipc(lake: Lake, path: str, schema: pa.Schema) -> pa.Table:
    """An Arrow file of the index: memory-mapped on a local lake (only the pages a run touches
    are read), fetched whole from an object store."""
    try:
        source: Any = pa.memory_map(path) if lake.local else pa.BufferReader(lake.fs.cat_file(path))
        table = pa.ipc.open_file(source).read_all()
    except (FileNotFoundError, OSError, pa.ArrowException) as exc:
        raise IndexDamaged(f"{path}: {type(exc).__name__}: {exc}") from exc
    if not table.schema.equals(schema):
        raise IndexDamaged(f"{path}: not a dedup index file of format {FORMAT}")
    return table


# ---------------------------------------------------------------------- the index
@dataclass(slots=True)
class DedupHistory:
    """The index: shards of decided images, and the images not decided yet (`images`)."""

    shards: list[Shard] = field(default_factory=list)
    images: dict[str, Image] = field(default_factory=dict)  # undecided images only
    consumed: dict[str, list[str]] = field(default_factory=lambda: {"images": [], "dedup_decisions": []})
    rows_read: int = 0  # rows of the lake's tables this object read (catch-ups)
    # What this object read of its shards: `index_rows` (rows whose key/hash/band columns it
    # holds), `detail_rows` (rows whose owners and dates it turned into Python objects).
    reads: Counter[str] = field(default_factory=Counter)
    _new: list[tuple[Shard, bytes, bytes]] = field(default_factory=list)  # shards to write

    def pending(self) -> list[Image]:
        """Images with no decision, in canonical order."""
        return sorted(self.images.values(), key=Image.rank)

    # ------------------------------------------------------------------ lookups
    def decisions_of(self, shas: list[str]) -> dict[str, tuple[str, str]]:
        """sha256 -> (decision, run_id) of those among `shas` that are decided."""
        out: dict[str, tuple[str, str]] = {}
        wanted = pa.array(sorted(set(shas)), pa.string())
        for shard in self.shards:
            rows = shard.find(wanted)
            if not len(rows):
                continue
            got = shard.rows.select(["sha256", "decision", "run_id"]).take(pa.array(rows))
            for sha, decision, run_id in zip(
                *(got.column(c).to_pylist() for c in got.column_names), strict=True
            ):
                if decision is not None:
                    out.setdefault(sha, (decision, run_id))
        return out

    def details(self, shas: list[str]) -> dict[str, tuple[Image | None, str | None]]:
        """sha256 -> (its merged image state or None, the run that kept it) for kept images."""
        out: dict[str, tuple[Image | None, str | None]] = {}
        wanted = pa.array(sorted(set(shas)), pa.string())
        for shard in self.shards:
            rows = shard.find(wanted)
            if not len(rows):
                continue
            got = shard.rows.select(DETAIL_COLUMNS).take(pa.array(rows))
            self.reads["detail_rows"] += got.num_rows
            for row in got.to_pylist():
                image, run_id = out.get(row["sha256"], (None, None))
                state = _image_of(row)
                if state is not None:
                    if image is None:
                        image = state
                    else:
                        image.absorb(state)
                out[row["sha256"]] = (image, run_id or row["run_id"])
        return out

    def hashed_among(self, shas: list[str]) -> set[str]:
        """Those of `shas` that some row holds with usable hashes (the band search finds them)."""
        out: set[str] = set()
        wanted = pa.array(sorted(set(shas)), pa.string())
        for shard in self.shards:
            rows = shard.find(wanted)
            out.update(shard.sha.take(pa.array(rows[shard.hashed[rows]])).to_pylist())
        return out

    def all_searchable(self) -> list[str]:
        """Every kept image with usable hashes (the embedding stage compares them all)."""
        out: set[str] = set()
        for shard in self.shards:
            out.update(shard.sha.filter(pa.array(shard.hashed)).to_pylist())
        return sorted(out)

    def searchable(self) -> int:
        """How many distinct kept images have usable hashes (what the band search compares):
        counted from the kept rows, plus the few owner rows that bring hashes to an image."""
        count, extra = 0, set()
        for shard in self.shards:
            decision = shard.rows.column("decision")
            kept = _numpy(pc.equal(decision, "kept").fill_null(False), bool)
            count += int((kept & shard.hashed).sum())
            later = _numpy(pc.is_null(decision), bool) & shard.hashed
            if later.any():
                extra.update(shard.sha.filter(pa.array(later)).to_pylist())
        if extra:
            with_kept_hashes = set()
            for shard in self.shards:
                rows = shard.find(pa.array(sorted(extra), pa.string()))
                decision = shard.rows.column("decision").take(pa.array(rows)).to_pylist()
                with_kept_hashes.update(
                    sha
                    for sha, d, h in zip(
                        shard.sha.take(pa.array(rows)).to_pylist(), decision, shard.hashed[rows], strict=True
                    )
                    if d == "kept" and h
                )
            count += len(extra - with_kept_hashes)
        return count

    def kept_unhashed(self) -> list[str]:
        """Kept images no row of which has usable hashes (rehashed from their bytes per run)."""
        without: set[str] = set()
        for shard in self.shards:
            kept = _numpy(pc.equal(shard.rows.column("decision"), "kept").fill_null(False), bool)
            without.update(shard.sha.filter(pa.array(kept & ~shard.hashed)).to_pylist())
        if not without:
            return []
        found = {sha for sha, (image, _) in self.details(sorted(without)).items() if image and image.hashes}
        return sorted(without - found)

    def search(self, queries: np.ndarray, radius: int, find: Any = None) -> list[tuple[int, str, int]]:
        """(query, sha256, distance) of every kept image within `radius` of a query's pHash
        (pHash or mirrored pHash, the smaller), exactly. `find` (a `range_pairs`-like search over
        packed hashes) replaces the band search, e.g. the flow's sharded one."""
        best: dict[tuple[int, str], int] = {}
        for shard in self.shards:
            if not shard.hashed.any() or not len(queries):
                continue
            if find is None and radius <= bands.MIH_MAX_RADIUS:
                q, r, d = bands.search(queries, shard.phash, shard.mirror, shard.bands, radius)
            else:
                q, r, d = _packed_search(queries, shard, radius, find)
            if not len(q):
                continue
            shas = shard.sha.take(pa.array(r)).to_pylist()
            for qi, sha, dist in zip(q.tolist(), shas, d.tolist(), strict=True):
                key = (qi, sha)
                if key not in best or dist < best[key]:
                    best[key] = dist
        return sorted((q, sha, d) for (q, sha), d in best.items())

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
            self._reset()
        new = {
            table: [p for p in current[table] if _name(p) not in set(self.consumed[table])]
            for table in self.consumed
        }
        if not any(new.values()):
            return False
        fresh: dict[str, Image] = {}
        if new["images"]:
            rows = lake.read(
                "images", columns=IMAGE_COLUMNS, where=pc.field("status") == "ok", fragments=new["images"]
            )
            self.rows_read += rows.num_rows
            for batch in rows.to_batches(max_chunksize=8192):
                for row in batch.to_pylist():
                    if row["sha256"]:
                        fresh.setdefault(row["sha256"], Image(sha256=row["sha256"])).merge(row)
        decided: dict[str, tuple[str, str]] = {}
        if new["dedup_decisions"]:
            rows = lake.read(
                "dedup_decisions", columns=["sha256", "decision", "run_id"], fragments=new["dedup_decisions"]
            )
            self.rows_read += rows.num_rows
            for sha, decision, run_id in zip(
                *(rows.column(c).to_pylist() for c in ("sha256", "decision", "run_id")), strict=True
            ):
                decided.setdefault(sha, (decision, run_id))
        earlier = self.decisions_of(list(fresh) + list(decided))
        entries: list[tuple[str, str | None, str | None, Image | None]] = []
        for sha, (decision, run_id) in decided.items():
            if sha in earlier:  # decided in an earlier shard already (decisions are final)
                continue
            image = self.images.pop(sha, None)
            if sha in fresh:
                image = image or Image(sha256=sha)
                image.absorb(fresh.pop(sha))
            entries.append((sha, decision, run_id, image if decision == "kept" else None))
        for sha, image in fresh.items():
            before = earlier.get(sha, ("",))[0]
            if before == "kept":  # a later row of an image kept earlier: its owners count too
                entries.append((sha, None, None, image))
            elif before != "dropped":  # a dropped image needs nothing more
                if sha in self.images:
                    self.images[sha].absorb(image)
                else:
                    self.images[sha] = image
        if entries:
            rows_table = _rows(entries)
            data = _ipc_bytes(rows_table)
            name = f"shard-{len(self.shards):05d}-{hashlib.sha256(data).hexdigest()[:16]}"
            shard, rows_bytes, band_bytes = Shard.make(name, rows_table)
            self.shards.append(shard)
            self._new.append((shard, rows_bytes, band_bytes))
        for table, paths in new.items():
            # A fragment the read skipped (unreadable) is not consumed: it is tried again next time.
            self.consumed[table] = sorted(
                set(self.consumed[table]) | {_name(p) for p in paths if p not in lake.skipped}
            )
        return True

    def _reset(self) -> None:
        self.shards, self.images, self._new = [], {}, []
        self.consumed = {table: [] for table in self.consumed}

    # ------------------------------------------------------------------ persistence
    def manifest(self, pending_file: str | None) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "hash_method": HASH_METHOD,
            "shards": [s.name for s in self.shards],
            "pending": pending_file,
            "consumed": self.consumed,
        }


def _packed_search(
    queries: np.ndarray, shard: Shard, radius: int, find: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from lookbench_live.dedup.index import range_pairs

    rows = np.nonzero(shard.hashed)[0]
    targets = np.concatenate([shard.phash[rows], shard.mirror[rows]])
    pairs = (find or range_pairs)(_packed(queries), _packed(targets), radius)
    if not len(pairs):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    return pairs.query, rows[pairs.target % len(rows)], pairs.distance


def _packed(u64: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(u64.astype(">u8")).view(np.uint8).reshape(-1, 8)


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def index_dir(lake: Lake) -> str:
    return lake.path(*INDEX_DIR)


def index_path(lake: Lake) -> str:
    """The manifest: the file that says which shards count."""
    return f"{index_dir(lake)}/{MANIFEST}"


def load(lake: Lake) -> DedupHistory:
    """The persisted index, or an empty one (to be caught up from the whole lake) when its
    manifest is missing, unreadable, of another format or hash method, or names a file that is
    missing or damaged."""
    try:
        with lake.fs.open(index_path(lake), "rb") as handle:
            manifest = json.loads(handle.read())
    except FileNotFoundError:
        return DedupHistory()
    except (OSError, ValueError) as exc:
        log.warning(
            "lake %s: the dedup index is unreadable (%s); rebuilding it from the tables", lake.home, exc
        )
        return DedupHistory()
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or manifest.get("hash_method") != HASH_METHOD
    ):
        return DedupHistory()
    try:
        state = DedupHistory(
            consumed={t: list(manifest["consumed"][t]) for t in ("images", "dedup_decisions")}
        )
        for name in manifest["shards"]:
            rows = _read_ipc(lake, f"{index_dir(lake)}/{name}.rows.arrow", SCHEMA)
            band_table = _read_ipc(lake, f"{index_dir(lake)}/{name}.bands.arrow", BANDS_SCHEMA)
            built = {n: _numpy(band_table.column(n), np.uint32) for n in BANDS_SCHEMA.names}
            if len(built["key0"]) != 2 * int(pc.sum(rows.column("hashed")).as_py() or 0):
                raise IndexDamaged(f"shard {name}: its bands do not match its rows")
            state.shards.append(Shard(name, rows, built))
            state.reads["index_rows"] += rows.num_rows
        if manifest["pending"]:
            pending = _read_ipc(lake, f"{index_dir(lake)}/{manifest['pending']}", SCHEMA)
            for row in pending.to_pylist():
                image = _image_of(row)
                if image is not None:
                    state.images[row["sha256"]] = image
    except (IndexDamaged, KeyError, TypeError, ValueError, pa.ArrowException) as exc:
        log.warning("lake %s: the dedup index is damaged (%s); rebuilding it from the tables", lake.home, exc)
        return DedupHistory()
    return state


def save(lake: Lake, state: DedupHistory) -> None:
    """Write the new shard and the pending file, then the manifest that names them (atomically:
    a run killed before it leaves the previous index); then delete what no manifest names."""
    directory = index_dir(lake)
    lake.fs.makedirs(directory, exist_ok=True)
    for shard, rows_bytes, band_bytes in state._new:
        atomic_write_bytes(lake.fs, f"{directory}/{shard.name}.rows.arrow", rows_bytes)
        atomic_write_bytes(lake.fs, f"{directory}/{shard.name}.bands.arrow", band_bytes)
    state._new = []
    pending_file = None
    if state.images:
        data = _ipc_bytes(_rows([(sha, None, None, image) for sha, image in state.images.items()]))
        pending_file = f"pending-{hashlib.sha256(data).hexdigest()[:16]}.arrow"
        atomic_write_bytes(lake.fs, f"{directory}/{pending_file}", data)
    manifest = json.dumps(state.manifest(pending_file), sort_keys=True).encode()
    atomic_write_bytes(lake.fs, index_path(lake), manifest)
    named = {MANIFEST, pending_file} | {
        f"{s.name}.{kind}.arrow" for s in state.shards for kind in ("rows", "bands")
    }
    for path in lake.fs.ls(directory, detail=False):
        if _name(path) not in named and not _name(path).startswith("."):
            lake.fs.rm(path)
    legacy = lake.path(*LEGACY_INDEX)
    if lake.fs.exists(legacy):
        lake.fs.rm(legacy)


def caught_up(lake: Lake) -> DedupHistory:
    """The index, caught up with the lake and saved when it changed."""
    state = load(lake)
    if state.catch_up(lake):
        save(lake, state)
    return state
