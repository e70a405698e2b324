"""The persisted takedown list: items their owners asked to remove, kept out of releases and exports.

An entry names an item by page or image URL, by source (a whole site), by the sha256 of its
bytes, or by its pHash (a re-encoded or resized copy is the same photo within the dedup
radius). Entries live in the lake table `takedowns` and are never deleted by the pipeline.

- :func:`takedown_filter` gives the release assembler a function row -> reason (or None);
- :func:`releases_holding` tells which committed releases hold an item, for the reply to its owner;
- `flows/export.py` refuses to export a release holding a listed row (:func:`takedown_hits`):
  its correction (`release correct`) is exported instead.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
HIT_BATCH_ROWS = 128  # rows read at a time (the release writer's row group): the memory bound


def takedown_hits(lake: Lake, base: str, files: Iterable[str], takedowns: TakedownList) -> dict[str, int]:
    """{file: rows the entries match} among the Parquet `files` (keys `check_file_key` accepted)
    of the release folder `base`, read a row group's worth at a time (only the match columns,
    and the images only when there are pHash entries)."""
    found: dict[str, int] = {}
    if not len(takedowns):  # the common case: nothing to read
        return found
    columns = [*MATCH_COLUMNS, *(("image", "raw_image") if takedowns.phashes else ())]
    for rel in sorted(files):
        path = f"{base}/{rel}"
        if not rel.endswith(".parquet") or not lake.fs.exists(path):
            continue
        with lake.fs.open(path, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            present = [c for c in columns if c in parquet.schema_arrow.names]
            hits = sum(
                takedowns.reason(row) is not None
                for batch in parquet.iter_batches(batch_size=HIT_BATCH_ROWS, columns=present)
                for row in batch.to_pylist()
            )
        if hits:
            found[rel] = hits
    return found


def releases_holding(lake: Lake, takedowns: TakedownList) -> dict[str, dict[str, int]]:
    """version -> {file: rows the entries match} for every committed release that holds the item."""
    from lookbench_live.warehouse.release import FILES, committed_versions, release_dir

    found: dict[str, dict[str, int]] = {}
    for version in committed_versions(lake):
        hits = takedown_hits(lake, release_dir(lake, version), FILES, takedowns)
        if hits:
            found[version] = hits
    return found
