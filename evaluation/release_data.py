"""Read a release (committed, or a staging folder) for evaluation, without image bytes.

A committed release is found through its `manifest.json` (never a directory listing),
and only the Parquet files its manifest lists are opened. A staging folder (the flow
evaluating before commit) has no manifest yet; then the contracted file names are read.
Image bytes are streamed on demand (`iter_images`), so memory holds labels only.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from lookbench_live.schema.committed import check_version, release_dir, resolve_version
from lookbench_live.schema.release import MANIFEST, NOISE, RELEASE_SCHEMA, SPLIT_NAMES, SUBSETS
from lookbench_live.warehouse.lake import Lake

LABEL_COLUMNS = (
    "sha256",
    "raw_sha256",  # the photo a street crop was cut from: its look (evaluation/outfit.py)
    "category",
    "main_attribute",
    "item_ID",
    "attributes",
    "first_seen_at",
    "published_at",
)


class ReleaseReadError(RuntimeError):
    """A release file is missing or malformed; the message names it."""


@dataclass(slots=True)
class ReleaseData:
    """Label columns of every split of one release; `files` maps 'subset/split' -> path on lake.fs."""

    version: str
    base: str
    manifest: dict
    files: dict[str, str]
    tables: dict[str, pa.Table] = field(default_factory=dict)  # 'subset/split' -> label columns

    def query(self, subset: str) -> pa.Table | None:
        return self.tables.get(f"{subset}/query")

    def gallery(self, subset: str) -> pa.Table | None:
        return self.tables.get(f"{subset}/gallery")

    @property
    def noise(self) -> pa.Table:
        table = self.tables.get(f"{NOISE}/gallery")
        return table if table is not None else _empty_labels()

    def subsets(self) -> list[str]:
        """Subsets present with a query file, in the published order."""
        return [s for s in SUBSETS if f"{s}/query" in self.tables]

    def all_sha256(self) -> list[str]:
        seen: dict[str, None] = {}
        for table in self.tables.values():
            for sha in table.column("sha256").to_pylist():
                seen.setdefault(sha, None)
        return list(seen)


def _empty_labels() -> pa.Table:
    return pa.schema([RELEASE_SCHEMA.field(c) for c in LABEL_COLUMNS]).empty_table()


def locate(lake: Lake, version: str, release_path: str | None = None) -> tuple[str, str, dict]:
    """(version, base path on lake.fs, manifest or {}) of a committed release or a staging folder."""
    if release_path is None:
        version = resolve_version(lake, version)
        base = release_dir(lake, version)
        manifest = json.loads(lake.fs.cat_file(f"{base}/{MANIFEST}"))
        return version, base, manifest
    if version == "latest":
        raise ReleaseReadError("a staging folder needs its own version (vYYYYMMDD), not 'latest'")
    version = check_version(version)
    base = release_path.rstrip("/")
    manifest_path = f"{base}/{MANIFEST}"
    manifest = json.loads(lake.fs.cat_file(manifest_path)) if lake.fs.exists(manifest_path) else {}
    return version, base, manifest


def load_release(lake: Lake, version: str, release_path: str | None = None) -> ReleaseData:
    """Label columns of every query and gallery file of the release (see module docstring)."""
    version, base, manifest = locate(lake, version, release_path)
    wanted = SPLIT_NAMES
    listed = manifest.get("files") if manifest else None
    files: dict[str, str] = {}
    for name in wanted:
        rel = f"{name}.parquet"
        if listed is not None:
            if rel in listed:
                files[name] = f"{base}/{rel}"
        elif lake.fs.exists(f"{base}/{rel}"):
            files[name] = f"{base}/{rel}"
    if not any(name.endswith("/query") for name in files):
        raise ReleaseReadError(f"release {version} at {base} has no query file")
    data = ReleaseData(version=version, base=base, manifest=manifest, files=files)
    for name, path in files.items():
        try:
            with lake.fs.open(path, "rb") as handle:
                schema = pq.read_schema(handle)
                missing = [c for c in ("sha256", "category", "item_ID") if c not in schema.names]
                if missing:
                    raise ReleaseReadError(f"{path} lacks the column(s) {missing}")
                columns = [c for c in LABEL_COLUMNS if c in schema.names]
                handle.seek(0)
                table = pq.read_table(handle, columns=columns)
        except FileNotFoundError as exc:
            raise ReleaseReadError(f"release {version}: {path} is listed but missing") from exc
        if table.column("sha256").null_count:
            raise ReleaseReadError(f"{path} has rows without sha256")
        data.tables[name] = table
    return data


def iter_images(
    lake: Lake, data: ReleaseData, wanted: Iterable[str], batch_rows: int = 256
) -> Iterator[tuple[str, bytes]]:
    """(sha256, image bytes) of each wanted image once, streamed in row groups."""
    remaining = set(wanted)
    for path in data.files.values():
        if not remaining:
            return
        with lake.fs.open(path, "rb") as handle:
            # pre_buffer=False: the default reads row groups' image columns ahead (vectors._read_parquet).
            parquet = pq.ParquetFile(handle, pre_buffer=False)
            for batch in parquet.iter_batches(batch_size=batch_rows, columns=["sha256", "image"]):
                shas = batch.column(0).to_pylist()
                images = batch.column(1)
                picks = [i for i, s in enumerate(shas) if s in remaining]
                if not picks:
                    continue
                image_bytes = images.field("bytes")
                for i in picks:
                    sha = shas[i]
                    if sha not in remaining:
                        continue
                    value = image_bytes[i].as_py()
                    if not value:
                        raise ReleaseReadError(f"{path}: image {sha} has no bytes")
                    remaining.discard(sha)
                    yield sha, value


def query_moment(table: pa.Table) -> list[dt.datetime | None]:
    """When a query could first have been seen: the earlier of `published_at` and `first_seen_at`."""
    first = table.column("first_seen_at").to_pylist() if "first_seen_at" in table.column_names else []
    published = table.column("published_at").to_pylist() if "published_at" in table.column_names else []
    out: list[dt.datetime | None] = []
    for i in range(table.num_rows):
        known = [
            t for t in (first[i] if first else None, published[i] if published else None) if t is not None
        ]
        out.append(min(known) if known else None)
    return out
