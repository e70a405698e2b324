"""Verification of a release folder: every file its manifest lists, checksums, row counts, the
`huggingface` features and each row's image hash; fails closed (a missing or extra file is a fault).

Read-only, beside the read side (`schema/committed.py`): the writer verifies a staging folder
before commit, and `release verify`, the evaluation and the report verify committed ones.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lookbench_live.schema.committed import (
    DamagedRelease,
    ReleaseStore,
    check_version,
    parse_manifest,
    release_dir,
    resolve_version,
)
from lookbench_live.schema.release import (
    MANIFEST,
    ROW_GROUP_ROWS,
    ReleaseKeyError,
    check_file_key,
    features_fault,
)

HASH_CHUNK = 1 << 20


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(lake: ReleaseStore, path: str) -> tuple[str, int]:
    """(sha256, size) of a file on the lake, read in chunks (never whole into memory)."""
    digest, size = hashlib.sha256(), 0
    with lake.fs.open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _list_files(lake: ReleaseStore, base: str) -> list[str]:
    base = base.rstrip("/")
    if not lake.fs.exists(base):
        return []
    return sorted(
        p[len(base) + 1 :] for p in lake.fs.find(base) if not os.path.basename(p).startswith(".tmp-")
    )


def verify_path(lake: ReleaseStore, base: str) -> list[str]:
    """Every fault of the release folder at `base`, as sentences naming the file; [] if sound.

    Fails closed: a missing manifest, a missing, extra or altered file, and a row count
    that disagrees with the Parquet footer are each a fault.
    """
    problems: list[str] = []
    path = f"{base}/{MANIFEST}"
    try:
        manifest = parse_manifest(lake.fs.cat_file(path), os.path.basename(base.rstrip("/")), path)
    except FileNotFoundError:
        return [f"{MANIFEST} is missing"]
    except DamagedRelease as exc:
        return [f"{MANIFEST} {exc.reason}"]
    listed: dict[str, dict[str, Any]] = manifest["files"]
    if not listed:
        problems.append(f"{MANIFEST} lists no files")
    present = set(_list_files(lake, base)) - {MANIFEST}
    refused = set()
    for rel in sorted(listed):
        try:
            check_file_key(rel)
        except ReleaseKeyError:  # never used as a path: not hashed, not opened
            refused.add(rel)
            problems.append(f"{MANIFEST} lists {rel!r}, which is not a file of the release format")
    for rel in sorted(set(listed) - present - refused):
        problems.append(f"{rel} is listed in {MANIFEST} but missing")
    for rel in sorted(present - set(listed)):
        problems.append(f"{rel} is not listed in {MANIFEST} (extra file)")
    for rel in sorted((set(listed) - refused) & present):
        sha, size = file_digest(lake, f"{base}/{rel}")  # in chunks: a noise file may be gigabytes
        entry = listed[rel]
        if size != entry.get("size") or sha != entry.get("sha256"):
            problems.append(f"{rel} was altered (sha256 or size differs from {MANIFEST})")
            continue
        if rel.endswith(".parquet"):
            with lake.fs.open(f"{base}/{rel}", "rb") as handle:
                parquet = pq.ParquetFile(handle)
                rows, schema = parquet.metadata.num_rows, parquet.schema_arrow
            if rows != entry.get("rows"):
                problems.append(f"{rel} has {rows} rows but {MANIFEST} says {entry.get('rows')}")
            # The `huggingface` features (what `datasets` decodes as images) must describe the
            # file; a release written before they were declared has none and is sound.
            if (fault := features_fault(schema)) is not None:
                problems.append(f"{rel}: {fault}")
            problems += row_hash_faults(lake, f"{base}/{rel}", rel)
    return problems


# Each release row's image bytes and the column naming their sha256.
ROW_HASHES = (("image", "sha256"), ("raw_image", "raw_sha256"))


MAX_ROW_FAULTS = 5  # rows named per file; the rest are counted


def row_hash_faults(lake: ReleaseStore, path: str, rel: str) -> list[str]:
    """Rows of the release file at `path` whose `image`/`raw_image` bytes do not hash to their
    `sha256`/`raw_sha256` column (X13): a file can match its manifest checksum and still hold
    bytes that are not the images its rows name (a build that packed a damaged lake image).

    Streamed a row group's worth of rows at a time (the writer's bound), with the page checksums
    checked; a file that cannot be decoded is a fault too."""
    problems: list[str] = []
    bad = 0
    try:
        with lake.fs.open(path, "rb") as handle:
            parquet = pq.ParquetFile(handle, page_checksum_verification=True)
            names = set(parquet.schema_arrow.names)
            missing = [name for pair in ROW_HASHES for name in pair if name not in names]
            if missing:
                return [f"{rel} lacks the columns {missing}: its rows' image hashes cannot be checked"]
            columns = [name for pair in ROW_HASHES for name in pair]
            row = 0
            for batch in parquet.iter_batches(batch_size=ROW_GROUP_ROWS, columns=columns):
                for image_column, sha_column in ROW_HASHES:
                    # struct_field keeps a null struct null (`.field` would not).
                    blobs = pc.struct_field(batch.column(image_column), "bytes").to_pylist()
                    shas = batch.column(sha_column).to_pylist()
                    for i, (blob, sha) in enumerate(zip(blobs, shas, strict=True)):
                        if blob is None and sha is None:
                            continue
                        if blob is None or sha is None or _sha256_bytes(blob) != sha:
                            bad += 1
                            if bad <= MAX_ROW_FAULTS:
                                problems.append(
                                    f"{rel} row {row + i}: its {image_column} bytes do not hash to its "
                                    f"{sha_column} {sha}"
                                )
                row += batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        return [*problems, f"{rel} cannot be decoded ({type(exc).__name__}: {str(exc)[:200]})"]
    if bad > MAX_ROW_FAULTS:
        problems.append(f"{rel}: {bad - MAX_ROW_FAULTS} more rows whose image bytes do not match their hash")
    return problems


def verify_release(lake: ReleaseStore, version: str) -> list[str]:
    version = resolve_version(lake, version) if version == "latest" else check_version(version)
    base = release_dir(lake, version)
    if not lake.fs.exists(base):
        return [f"release {version} does not exist in {lake.home}"]
    return verify_path(lake, base)
