"""Export a committed release snapshot to a folder, an fsspec URL (s3://…) or a .tar archive.

The copy is verified at the destination (every checksum of the manifest, nothing missing or
extra). A destination that already holds a *different* snapshot is never overwritten; one
that holds the same snapshot is left as it is.

Takedowns (`warehouse/takedown.py`) apply to every export: rows they match are left out (and
the queries left without a gallery match), the Parquet files are rewritten without them, and
the exported copy gets its own manifest (new checksums and row counts, `takedown` saying what
was removed and from which original manifest), with the dataset card's row table and the
Croissant checksums updated to match. A destination holding an earlier export of the same
release is replaced, so a takedown reaches copies already exported.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass, field

import fsspec
import pyarrow.parquet as pq

from lookbench_live.schema.release import ReleaseKeyError, check_file_key
from lookbench_live.warehouse.card import patch_card_rows, patch_croissant_checksums
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes, parquet_bytes
from lookbench_live.warehouse.release import (
    MANIFEST,
    ReleaseWithdrawn,
    read_manifest,
    release_dir,
    resolve_version,
    withdrawal,
)
from lookbench_live.warehouse.takedown import filter_release_files, load_takedowns


class ExportError(RuntimeError):
    """The export was refused or failed verification; the message names the file."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    version: str
    destination: str
    files: int
    bytes: int
    already_there: bool
    removed: dict[str, dict[str, int]] = field(default_factory=dict)  # file -> takedown reason -> rows


# What a manifest's file key may look like: a relative path of plain segments (R12). Keys are
# joined to the lake and the destination; a tampered manifest must not lead either elsewhere.
_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=-]{0,199}")


def safe_relative_path(rel: object) -> str:
    """`rel` when it is a safe relative path (plain segments, no `..`, no absolute path); else ExportError."""
    if not isinstance(rel, str) or not rel or len(rel) > 400:
        raise ExportError(f"manifest file key {rel!r} is not a usable relative path")
    segments = rel.split("/")
    if rel == MANIFEST or not all(_SAFE_SEGMENT.fullmatch(s) for s in segments):
        raise ExportError(f"manifest file key {rel!r} is not a safe relative path; refusing to export")
    try:
        return check_file_key(rel)  # the one rule for every key read from a manifest
    except ReleaseKeyError as exc:
        raise ExportError(f"{exc}; refusing to export") from exc


def _snapshot(lake: Lake, version: str) -> tuple[dict, dict[str, bytes]]:
    manifest = read_manifest(lake, version)
    for rel in manifest["files"]:
        safe_relative_path(rel)
    base = release_dir(lake, version)
    data = {rel: lake.fs.cat_file(f"{base}/{rel}") for rel in manifest["files"]}
    data[MANIFEST] = lake.fs.cat_file(f"{base}/{MANIFEST}")
    return manifest, data


def _check(manifest: dict, data: dict[str, bytes], where: str) -> None:
    listed = set(manifest["files"]) | {MANIFEST}
    if set(data) != listed:
        missing, extra = sorted(listed - set(data)), sorted(set(data) - listed)
        raise ExportError(f"{where}: missing {missing} extra {extra}")
    for rel, entry in manifest["files"].items():
        if hashlib.sha256(data[rel]).hexdigest() != entry["sha256"] or len(data[rel]) != entry["size"]:
            raise ExportError(f"{where}: {rel} does not match its manifest checksum")


def _without_takedowns(
    lake: Lake, manifest: dict, data: dict[str, bytes]
) -> tuple[dict, dict[str, bytes], dict]:
    """The snapshot minus taken-down rows, with a manifest of its own; unchanged when nothing matches."""
    filtered = filter_release_files(data, load_takedowns(lake), parquet_bytes)
    if not filtered.data:
        return manifest, data, {}
    out = dict(data)
    new = copy.deepcopy(manifest)
    for rel, blob in filtered.data.items():
        rows = pq.ParquetFile(io.BytesIO(blob)).metadata.num_rows
        out[rel] = blob
        new["files"][rel] = {"rows": rows, "sha256": hashlib.sha256(blob).hexdigest(), "size": len(blob)}
        if isinstance(new.get("rows"), dict) and rel in new["rows"]:
            new["rows"][rel] = rows
    # The card's row table and Croissant's per-file checksums describe the files: keep them true.
    if "README.md" in out:
        out["README.md"] = patch_card_rows(out["README.md"].decode(), new.get("rows", {})).encode()
    if "croissant.json" in out:
        checksums = {rel: entry["sha256"] for rel, entry in new["files"].items() if rel.endswith(".parquet")}
        out["croissant.json"] = patch_croissant_checksums(out["croissant.json"].decode(), checksums).encode()
    for rel in ("README.md", "croissant.json"):
        if rel in out and rel in new["files"]:
            new["files"][rel] = {"sha256": hashlib.sha256(out[rel]).hexdigest(), "size": len(out[rel])}
    new["takedown"] = {
        "source_manifest_sha256": hashlib.sha256(data[MANIFEST]).hexdigest(),
        "removed": filtered.removed,
    }
    out[MANIFEST] = json.dumps(new, indent=2, sort_keys=True).encode()
    return new, out, filtered.removed


def _same_release(existing: bytes | None, original: bytes) -> bool:
    """Whether ``existing`` (a destination's manifest) is an export of the release ``original``
    describes, before or after takedowns: such a copy may be replaced by a newer export."""
    if existing is None:
        return False
    if existing == original:
        return True
    try:
        source = json.loads(existing).get("takedown", {}).get("source_manifest_sha256")
    except (ValueError, AttributeError):
        return False
    return source == hashlib.sha256(original).hexdigest()


def export_release(lake: Lake, version: str, destination: str) -> ExportResult:
    version = resolve_version(lake, version)
    record = withdrawal(lake, version)
    if record is not None:  # a withdrawn release is never served again (docs/takedown.md)
        raise ReleaseWithdrawn(version, record)
    manifest, data = _snapshot(lake, version)
    _check(manifest, data, f"release {version} in the lake")
    original = data[MANIFEST]
    manifest, data, removed = _without_takedowns(lake, manifest, data)
    _check(manifest, data, f"release {version} without its takedowns")
    total = sum(len(v) for v in data.values())
    if destination.endswith(".tar"):
        return _export_tar(version, manifest, data, destination, total, original, removed)
    fs, root = fsspec.core.url_to_fs(destination)
    target = f"{root.rstrip('/')}/{version}"
    existing_manifest = f"{target}/{MANIFEST}"
    where = f"{destination.rstrip('/')}/{version}"
    if fs.exists(existing_manifest):
        existing = fs.cat_file(existing_manifest)
        if existing == data[MANIFEST]:
            copied = {rel: fs.cat_file(f"{target}/{rel}") for rel in manifest["files"]}
            copied[MANIFEST] = data[MANIFEST]
            _check(manifest, copied, where)
            return ExportResult(version, where, len(data), total, True, removed)
        if not _same_release(existing, original):
            raise ExportError(
                f"{destination} already holds a different snapshot of {version}; refusing to overwrite"
            )
        # An earlier export of this release (before a takedown): replace it below.
    elif fs.exists(target) and fs.ls(target):
        raise ExportError(f"{destination}/{version} exists without a manifest; refusing to write into it")
    for rel in sorted(manifest["files"]):  # data first, the manifest last: it is the commit point
        atomic_write_bytes(fs, f"{target}/{rel}", data[rel])
    atomic_write_bytes(fs, existing_manifest, data[MANIFEST])
    present = {p[len(target) + 1 :] for p in fs.find(target)}
    copied = {rel: fs.cat_file(f"{target}/{rel}") for rel in present}
    _check(manifest, copied, where)
    return ExportResult(version, where, len(data), total, False, removed)


def _export_tar(
    version: str,
    manifest: dict,
    data: dict[str, bytes],
    destination: str,
    total: int,
    original: bytes,
    removed: dict,
) -> ExportResult:
    fs, path = fsspec.core.url_to_fs(destination)
    if fs.exists(path):
        with fs.open(path, "rb") as handle:
            existing = _read_tar(handle.read(), version)
        if existing.get(MANIFEST) == data[MANIFEST]:
            _check(manifest, existing, destination)
            return ExportResult(version, destination, len(data), total, True, removed)
        if not _same_release(existing.get(MANIFEST), original):
            raise ExportError(f"{destination} already holds a different snapshot; refusing to overwrite")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for rel in sorted(data):
            info = tarfile.TarInfo(f"{version}/{rel}")
            info.size = len(data[rel])
            info.mtime = 0  # reproducible archives
            tar.addfile(info, io.BytesIO(data[rel]))
    atomic_write_bytes(fs, path, buffer.getvalue())
    with fs.open(path, "rb") as handle:
        _check(manifest, _read_tar(handle.read(), version), destination)
    return ExportResult(version, destination, len(data), total, False, removed)


def _read_tar(blob: bytes, version: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r") as tar:
        for member in tar.getmembers():
            # Only regular files under the version folder; never follow links or leave it.
            if (
                not member.isfile()
                or not member.name.startswith(f"{version}/")
                or ".." in member.name.split("/")
            ):
                raise ExportError(f"unexpected archive member {member.name!r}")
            handle = tar.extractfile(member)
            assert handle is not None
            out[member.name[len(version) + 1 :]] = handle.read()
    return out
