"""The persisted takedown list: items their owners asked to remove, kept out of releases and exports.

An entry names an item by page or image URL, by source (a whole site), by the sha256 of its
bytes, or by its pHash (a re-encoded or resized copy is the same photo within the dedup
radius). Entries live in the lake table `takedowns` and are never deleted by the pipeline.

- :func:`takedown_filter` gives the release assembler a function row -> reason (or None);
- :func:`releases_holding` tells which committed releases hold an item, for the reply to its owner;
- `flows/export.py` drops matching rows from every export (:func:`filter_release_files`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.parquet as pq

from lookbench_live.schema.hashing import hamming, hash_bytes
from lookbench_live.schema.records import Takedown
from lookbench_live.warehouse.lake import Lake

TABLE = "takedowns"
DEFAULT_RADIUS = 4  # dedup.radius's default: the same "same photo" as deduplication
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PHASH = re.compile(r"^[0-9a-f]{16}$")
# Columns a release row is matched on; `image` only when there are pHash entries.
MATCH_COLUMNS = ("sha256", "raw_sha256", "source", "source_url", "provenance", "item_ID")

Row = Mapping[str, Any]


class TakedownError(ValueError):
    """A takedown request is malformed (bad URL, hash or image); the message says which."""


def normalize_url(url: str) -> str:
    """The form URLs are compared in: lowercase scheme and host, no default port, no fragment,
    no trailing slash (except the root). Query strings are kept: they can name the product."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise TakedownError(f"{url!r} is not an http(s) URL")
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    port = parts.port
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    path = parts.path or "/"
    if len(path) > 1:
        path = path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def _safe_normalize(url: str) -> str | None:
    try:
        return normalize_url(url)
    except (TakedownError, ValueError):
        return None


def entries_for(
    *,
    url: str | None = None,
    source: str | None = None,
    sha256: str | None = None,
    image: bytes | None = None,
    radius: int = DEFAULT_RADIUS,
    reason: str | None = None,
    requested_by: str | None = None,
) -> list[Takedown]:
    """The records one request adds. An image gives two: its sha256 and its pHash."""
    common = {"reason": reason, "requested_by": requested_by}
    out: list[Takedown] = []
    if url:
        out.append(Takedown(kind="url", value=normalize_url(url), **common))
    if source:
        if not source.strip():
            raise TakedownError("--source must name a configured site")
        out.append(Takedown(kind="source", value=source.strip(), **common))
    if sha256:
        value = sha256.strip().lower()
        if not _SHA256.match(value):
            raise TakedownError(f"{sha256!r} is not a sha256 (64 hex digits)")
        out.append(Takedown(kind="sha256", value=value, **common))
    if image is not None:
        try:
            hashes = hash_bytes(image)
        except Exception as exc:  # Pillow's errors vary by format; all mean "not an image"
            raise TakedownError(f"the image cannot be decoded: {exc}") from None
        out.append(Takedown(kind="sha256", value=hashlib.sha256(image).hexdigest(), **common))
        out.append(
            Takedown(
                kind="phash", value=hashes.phash, phash_mirror=hashes.phash_mirror, radius=radius, **common
            )
        )
    if not out:
        raise TakedownError("name the item: --url, --source, --sha256 or --image")
    return out


def add_takedowns(lake: Lake, records: Iterable[Takedown]) -> int:
    """Persist the records (idempotent: an entry added twice is stored once); returns rows written."""
    return lake.append(records)


@dataclass(slots=True)
class TakedownList:
    """The entries, indexed for matching rows."""

    urls: set[str] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)
    sha256s: set[str] = field(default_factory=set)
    phashes: list[tuple[str, str | None, int]] = field(default_factory=list)  # (phash, mirror, radius)

    @classmethod
    def from_records(cls, records: Iterable[Takedown | Mapping[str, Any]]) -> TakedownList:
        found = cls()
        for record in records:
            get = record.get if isinstance(record, Mapping) else lambda k, r=record: getattr(r, k)
            kind, value = get("kind"), str(get("value"))
            if kind == "url":
                found.urls.add(value)
            elif kind == "source":
                found.sources.add(value)
            elif kind == "sha256":
                found.sha256s.add(value)
            elif kind == "phash" and _PHASH.match(value):
                radius = get("radius")
                found.phashes.append(
                    (value, get("phash_mirror"), DEFAULT_RADIUS if radius is None else radius)
                )
        return found

    def __len__(self) -> int:
        return len(self.urls) + len(self.sources) + len(self.sha256s) + len(self.phashes)

    def reason(self, row: Row) -> str | None:
        """Why ``row`` (a release row, or any mapping with those columns) is taken down, or None."""
        for column in ("sha256", "raw_sha256"):
            value = row.get(column)
            if value and value in self.sha256s:
                return f"takedown: sha256 {value}"
        source = row.get("source")
        if source and source in self.sources:
            return f"takedown: source {source}"
        if self.urls:
            for url in _row_urls(row):
                if url in self.urls:
                    return f"takedown: url {url}"
        if self.phashes:
            for column in ("image", "raw_image"):
                data = _image_bytes(row.get(column))
                if data is None:
                    continue
                try:
                    hashes = hash_bytes(data)
                except Exception:  # an undecodable image cannot match a pHash; sha256 still applied
                    continue
                for phash, mirror, radius in self.phashes:
                    distance = min(
                        hamming(hashes.phash, phash), hamming(hashes.phash, mirror) if mirror else 64
                    )
                    if distance <= radius:
                        return f"takedown: phash {phash} (distance {distance})"
        return None


def _row_urls(row: Row) -> Iterable[str]:
    """The row's image URL and every page URL its provenance names, normalized."""
    candidates = [row.get("source_url")]
    provenance = row.get("provenance")
    if isinstance(provenance, str) and provenance.startswith("{"):
        try:
            provenance = json.loads(provenance)
        except json.JSONDecodeError:
            provenance = None
    if isinstance(provenance, Mapping):
        candidates += [v for v in provenance.values() if isinstance(v, str)]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.startswith(("http://", "https://")):
            url = _safe_normalize(candidate)
            if url:
                yield url


def _image_bytes(value: Any) -> bytes | None:
    if isinstance(value, Mapping):
        value = value.get("bytes")
    return value if isinstance(value, bytes | bytearray) and value else None


def load_takedowns(lake: Lake) -> TakedownList:
    """Every persisted entry (an empty list when the table does not exist yet)."""
    return TakedownList.from_records(lake.read(TABLE).to_pylist())


def takedown_filter(lake: Lake) -> Callable[[Row], str | None]:
    """row -> reason it is taken down, or None; for the release assembler (read once, then pure).

    Rows are matched on `sha256`/`raw_sha256`, `source`, `source_url` and the URLs in
    `provenance`, and, when pHash entries exist, on the pHash of `image`/`raw_image` bytes.
    """
    return load_takedowns(lake).reason


# -------------------------------------------------------------------------- release files


@dataclass(frozen=True, slots=True)
class FilteredFiles:
    """Release files with taken-down rows removed: new bytes per rewritten file and why."""

    data: dict[str, bytes]  # rel -> bytes (only files that changed)
    removed: dict[str, dict[str, int]]  # rel -> reason -> rows


def filter_release_files(
    files: Mapping[str, bytes],
    takedowns: TakedownList,
    write: Callable[[pa.Table], bytes],
) -> FilteredFiles:
    """Drop taken-down rows from each Parquet file of a release, and then the queries left
    without any gallery row of their item in the same subset (they could never be answered)."""
    if not len(takedowns):  # the common case: nothing to read
        return FilteredFiles({}, {})
    tables = {
        rel: pq.read_table(pa.BufferReader(blob)) for rel, blob in files.items() if rel.endswith(".parquet")
    }
    keep: dict[str, list[bool]] = {}
    removed: dict[str, dict[str, int]] = {}
    columns_needed = [*MATCH_COLUMNS, *(("image", "raw_image") if takedowns.phashes else ())]
    for rel, table in tables.items():
        present = [c for c in columns_needed if c in table.column_names]
        mask = []
        for row in table.select(present).to_pylist():
            why = takedowns.reason(row)
            mask.append(why is None)
            if why is not None:
                key = why.split(" (")[0]
                removed.setdefault(rel, {}).setdefault(key, 0)
                removed[rel][key] += 1
        keep[rel] = mask
    # Orphaned queries: their item has no gallery row left in the subset.
    for rel, table in tables.items():
        subset, _, split = rel.rpartition("/")
        gallery_rel = f"{subset}/gallery.parquet"
        if split != "query.parquet" or gallery_rel not in tables or "item_ID" not in table.column_names:
            continue
        gallery_items = {
            item
            for item, kept in zip(
                tables[gallery_rel].column("item_ID").to_pylist(), keep[gallery_rel], strict=True
            )
            if kept
        }
        for i, item in enumerate(table.column("item_ID").to_pylist()):
            if keep[rel][i] and item not in gallery_items:
                keep[rel][i] = False
                removed.setdefault(rel, {}).setdefault("takedown: orphaned query", 0)
                removed[rel]["takedown: orphaned query"] += 1
    data = {
        rel: write(tables[rel].filter(pa.array(keep[rel], type=pa.bool_())))
        for rel in tables
        if not all(keep[rel])
    }
    return FilteredFiles(data, removed)


def releases_holding(lake: Lake, takedowns: TakedownList) -> dict[str, dict[str, int]]:
    """version -> {file: rows the entries match} for every committed release that holds the item."""
    from lookbench_live.warehouse.release import FILES, committed_versions, release_dir

    found: dict[str, dict[str, int]] = {}
    if not len(takedowns):
        return found
    columns = [*MATCH_COLUMNS, *(("image", "raw_image") if takedowns.phashes else ())]
    for version in committed_versions(lake):
        base = release_dir(lake, version)
        for rel in FILES:
            path = f"{base}/{rel}"
            if not lake.fs.exists(path):
                continue
            table = pq.read_table(pa.BufferReader(lake.fs.cat_file(path)))
            present = [c for c in columns if c in table.column_names]
            hits = sum(takedowns.reason(row) is not None for row in table.select(present).to_pylist())
            if hits:
                found.setdefault(version, {})[rel] = hits
    return found
