"""What earlier releases published: sha256 -> version, and each published image's hashes.

"Never republish" counts only releases whose audit gate passed or that had no gate: a
release whose gate failed does not use up its images (docs/release.md). Reading every
release file each month would grow with history, so each committed release's images are
indexed once into `derived/release_index/<version>.parquet` (sha256, version, pHash, mirror
pHash, dHash, method) — a cache beside the lake tables, rebuilt from the release's own bytes
when missing or stale (keyed by the manifest's sha256), never part of the release.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lookbench_live.schema.committed import (
    committed_versions,
    gate_passed,
    gate_status,
    manifest_files,
    read_manifest,
    release_dir,
)
from lookbench_live.schema.hashing import HASH_METHOD, hash_bytes
from lookbench_live.schema.release import MANIFEST, version_key
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes, parquet_bytes

log = logging.getLogger(__name__)

__all__ = ["ReleasedIndex", "counted_index", "gate_passed", "gate_status", "released_index", "write_index"]

INDEX_SCHEMA = pa.schema(
    [
        ("sha256", pa.string()),
        ("phash", pa.string()),
        ("phash_mirror", pa.string()),
        ("dhash", pa.string()),
        ("method", pa.string()),
    ]
)


@dataclass(slots=True)
class ReleasedIndex:
    """Published images of the counted releases, oldest release first."""

    versions: list[str] = field(default_factory=list)
    sha_version: dict[str, str] = field(default_factory=dict)  # earliest version wins
    hashes: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # sha -> (phash, mirror, dhash)
    _packed: tuple[np.ndarray, np.ndarray, list[str]] | None = None

    def near(self, phash: str, phash_mirror: str, radius: int) -> tuple[str, str, int] | None:
        """(version, sha256, distance) of the closest published image within `radius`, mirror included."""
        if not self.hashes:
            return None
        if self._packed is None:
            shas = sorted(self.hashes)
            own = np.array([int(self.hashes[s][0], 16) for s in shas], dtype=np.uint64)
            mirror = np.array([int(self.hashes[s][1], 16) for s in shas], dtype=np.uint64)
            self._packed = (own, mirror, shas)
        own, mirror, shas = self._packed
        q = np.uint64(int(phash, 16))
        qm = np.uint64(int(phash_mirror, 16))
        # min over (q, b), (q, mirror(b)) and (mirror(q), b): a mirrored copy matches either way.
        dist = np.minimum(
            np.minimum(np.bitwise_count(own ^ q), np.bitwise_count(mirror ^ q)), np.bitwise_count(own ^ qm)
        )
        best = int(np.argmin(dist))
        if int(dist[best]) > radius:
            return None
        sha = shas[best]
        return self.sha_version[sha], sha, int(dist[best])


def index_path(lake: Lake, version: str) -> str:
    return lake.path("derived", "release_index", f"{version}.parquet")


def _manifest_digest(lake: Lake, base: str) -> str:
    return hashlib.sha256(lake.fs.cat_file(f"{base}/{MANIFEST}")).hexdigest()


def write_index(
    lake: Lake, version: str, base: str, known: dict[str, tuple[str, str, str]] | None = None
) -> None:
    """Index the images of the committed release at `base` (hashes from `known` or the bytes)."""
    known = known or {}
    manifest = json.loads(lake.fs.cat_file(f"{base}/{MANIFEST}"))
    rows: dict[str, tuple[str, str, str, str]] = {}
    for rel in sorted(manifest.get("files", {})):
        if not rel.endswith(".parquet"):
            continue
        with lake.fs.open(f"{base}/{rel}", "rb") as handle:
            parquet = pq.ParquetFile(handle)
            names = set(parquet.schema_arrow.names)
            for sha_col, image_col in (("sha256", "image"), ("raw_sha256", "raw_image")):
                if not {sha_col, image_col} <= names:
                    continue
                missing: set[str] = set()
                for batch in parquet.iter_batches(columns=[sha_col], batch_size=4096):
                    for sha in batch.column(0).to_pylist():
                        if not sha or sha in rows:
                            continue
                        if sha in known:
                            rows[sha] = (*known[sha], HASH_METHOD)
                        else:
                            missing.add(sha)
                if missing:
                    _hash_from_file(parquet, sha_col, image_col, missing, rows, version)
    table = pa.table(
        {
            "sha256": list(rows),
            "phash": [r[0] for r in rows.values()],
            "phash_mirror": [r[1] for r in rows.values()],
            "dhash": [r[2] for r in rows.values()],
            "method": [r[3] for r in rows.values()],
        },
        schema=INDEX_SCHEMA,
    ).replace_schema_metadata({"manifest_sha256": _manifest_digest(lake, base), "hash_method": HASH_METHOD})
    lake.fs.makedirs(lake.path("derived", "release_index"), exist_ok=True)
    atomic_write_bytes(lake.fs, index_path(lake, version), parquet_bytes(table))


def _hash_from_file(
    parquet: pq.ParquetFile,
    sha_col: str,
    image_col: str,
    wanted: set[str],
    rows: dict[str, tuple[str, str, str, str]],
    version: str,
) -> None:
    for batch in parquet.iter_batches(columns=[sha_col, image_col], batch_size=256):
        for sha, image in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            if sha not in wanted or sha in rows or not image or not image.get("bytes"):
                continue
            try:
                h = hash_bytes(image["bytes"])
            except Exception as exc:  # a broken released image only weakens the near check
                log.warning("released image %s of %s is unreadable: %s", sha, version, exc)
                rows[sha] = ("", "", "", "")
                continue
            rows[sha] = (h.phash, h.phash_mirror, h.dhash or "", h.method)


def _read_index(lake: Lake, version: str, base: str) -> pa.Table:
    path = index_path(lake, version)
    digest = _manifest_digest(lake, base)
    if lake.fs.exists(path):
        with lake.fs.open(path, "rb") as handle:
            table = pq.read_table(handle)
        meta = table.schema.metadata or {}
        # A cache made with another hash method would have its rows skipped by `released_index`
        # (hashes of two methods do not compare), silently dropping that release from the near check.
        if (
            meta.get(b"manifest_sha256", b"").decode() == digest
            and meta.get(b"hash_method", b"").decode() == HASH_METHOD
        ):
            return table
    write_index(lake, version, base)
    with lake.fs.open(path, "rb") as handle:
        return pq.read_table(handle)


def released_index(lake: Lake, versions: Iterable[tuple[str, str, dict[str, Any]]]) -> ReleasedIndex:
    """The index over `versions` ((version, base path, manifest), oldest first) whose gate counts."""
    index = ReleasedIndex()
    for version, base, manifest in versions:
        if not gate_passed(manifest):
            continue
        index.versions.append(version)
        table = _read_index(lake, version, base)
        for sha, phash, mirror, dhash, method in zip(
            *(table.column(c).to_pylist() for c in INDEX_SCHEMA.names), strict=True
        ):
            index.sha_version.setdefault(sha, version)
            if phash and method == HASH_METHOD and sha not in index.hashes:
                index.hashes[sha] = (phash, mirror, dhash or "")
    return index


def counted_index(lake: Lake, *, before: str | None = None) -> ReleasedIndex:
    """Published images of committed releases older than `before` whose gate passed or had none."""
    versions = [v for v in committed_versions(lake) if before is None or version_key(v) < version_key(before)]
    manifests = {v: read_manifest(lake, v) for v in versions}  # a damaged release stops it, named
    for v, manifest in manifests.items():
        manifest_files(lake, v, manifest)
    return released_index(lake, ((v, release_dir(lake, v), manifests[v]) for v in versions))


def released_sha256s(lake: Lake, *, before: str | None = None) -> dict[str, str]:
    """sha256 of every image (rows' `image` and their `raw_image`) in counted releases -> version.

    `before` limits to versions strictly older than it; the earliest version wins. A release
    whose audit gate failed does not count: its images stay eligible.
    """
    return dict(counted_index(lake, before=before).sha_version)
