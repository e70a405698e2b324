"""Export a committed release snapshot to a folder, an fsspec URL (s3://…) or a .tar archive.

The copy is verified at the destination (every checksum of the manifest, nothing missing or
extra). A destination that already holds a *different* snapshot is never overwritten; one
that holds the same snapshot is left as it is.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from dataclasses import dataclass

import fsspec

from lookbench_live.warehouse.lake import Lake, atomic_write_bytes
from lookbench_live.warehouse.release import MANIFEST, read_manifest, release_dir, resolve_version


class ExportError(RuntimeError):
    """The export was refused or failed verification; the message names the file."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    version: str
    destination: str
    files: int
    bytes: int
    already_there: bool


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
    return rel


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


def export_release(lake: Lake, version: str, destination: str) -> ExportResult:
    version = resolve_version(lake, version)
    manifest, data = _snapshot(lake, version)
    _check(manifest, data, f"release {version} in the lake")
    total = sum(len(v) for v in data.values())
    if destination.endswith(".tar"):
        return _export_tar(version, manifest, data, destination, total)
    fs, root = fsspec.core.url_to_fs(destination)
    target = f"{root.rstrip('/')}/{version}"
    existing_manifest = f"{target}/{MANIFEST}"
    if fs.exists(existing_manifest):
        if fs.cat_file(existing_manifest) != data[MANIFEST]:
            raise ExportError(
                f"{destination} already holds a different snapshot of {version}; refusing to overwrite"
            )
        copied = {rel: fs.cat_file(f"{target}/{rel}") for rel in manifest["files"]}
        copied[MANIFEST] = data[MANIFEST]
        _check(manifest, copied, f"{destination}/{version}")
        return ExportResult(version, f"{destination.rstrip('/')}/{version}", len(data), total, True)
    if fs.exists(target) and fs.ls(target):
        raise ExportError(f"{destination}/{version} exists without a manifest; refusing to write into it")
    for rel in sorted(manifest["files"]):  # data first, the manifest last: it is the commit point
        atomic_write_bytes(fs, f"{target}/{rel}", data[rel])
    atomic_write_bytes(fs, existing_manifest, data[MANIFEST])
    present = {p[len(target) + 1 :] for p in fs.find(target)}
    copied = {rel: fs.cat_file(f"{target}/{rel}") for rel in present}
    _check(manifest, copied, f"{destination}/{version}")
    return ExportResult(version, f"{destination.rstrip('/')}/{version}", len(data), total, False)


def _export_tar(
    version: str, manifest: dict, data: dict[str, bytes], destination: str, total: int
) -> ExportResult:
    fs, path = fsspec.core.url_to_fs(destination)
    if fs.exists(path):
        with fs.open(path, "rb") as handle:
            existing = _read_tar(handle.read(), version)
        if existing.get(MANIFEST) != data[MANIFEST]:
            raise ExportError(f"{destination} already holds a different snapshot; refusing to overwrite")
        _check(manifest, existing, destination)
        return ExportResult(version, destination, len(data), total, True)
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
    return ExportResult(version, destination, len(data), total, False)


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
