"""Export a committed release snapshot to a folder, an fsspec URL (s3://…) or a .tar archive.

The export is a byte copy of the published release: every file is streamed in `CHUNK` pieces
(to the folder, or into a streamed tar), hashed as it is read and refused if it does not match
its manifest checksum, then verified again at the destination (every checksum of the manifest,
nothing missing or extra), read back in chunks. No file is ever read whole, so the peak memory
is a few chunks whatever the release's size (docs/benchmarks.md, "Export memory").

A published release never changes (docs/release.md, "Published means immutable"), so an export
never rewrites one: a release that holds a row on the takedown list, or that was withdrawn, is
refused, and the correction (`release correct VERSION`, a new version `vYYYYMMDD.N` without the
rows) is what gets exported; exporting it into a folder that holds the superseded version's
export removes that copy (docs/takedown.md). A destination that already holds a *different*
snapshot is never overwritten; one that holds the same snapshot is left as it is.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import fsspec

from lookbench_live.schema.release import ReleaseKeyError, check_file_key
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes
from lookbench_live.warehouse.release import (
    MANIFEST,
    ReleaseWithdrawn,
    read_manifest,
    release_dir,
    resolve_version,
    withdrawal,
)
from lookbench_live.warehouse.takedown import load_takedowns, takedown_hits

CHUNK = 1 << 20  # bytes per read and write: the export's memory bound per file
MAX_MANIFEST = 1 << 24  # a manifest in an archive larger than this is not one of ours


class ExportError(RuntimeError):
    """The export was refused or failed verification; the message names the file."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    version: str
    destination: str
    files: int
    bytes: int
    already_there: bool
    # Exports of the releases this one supersedes that were removed from the destination folder.
    removed_superseded: list[str] = field(default_factory=list)


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


# ---------------------------------------------------------------------- the destination
# `scheme:` at the start of a destination: then it must be a whole URL, `scheme://path`.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


def destination_fs(destination: str, lake: Lake) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and path of `destination`, refused (ExportError) when it is a malformed URL
    (`s3:/x` would be a local folder named `s3:`), names an unknown protocol, or lies inside the
    lake (an export into the lake's own release folder would overwrite the release it reads)."""
    scheme = _SCHEME.match(destination)
    if scheme is not None:
        rest = destination[scheme.end() :]
        if not rest.startswith("//") or not rest[2:].strip("/"):
            raise ExportError(
                f"--to {destination!r} is not a URL of the form {scheme.group(1)}://bucket/path "
                "(write ./ before a local path with a colon)"
            )
        try:
            fsspec.get_filesystem_class(scheme.group(1).lower())
        except (ValueError, ImportError) as exc:
            raise ExportError(f"--to {destination!r}: no filesystem for {scheme.group(1)!r} ({exc})") from exc
    fs, path = fsspec.core.url_to_fs(destination)
    if isinstance(fs, fsspec.implementations.local.LocalFileSystem) and lake.local:
        target, home = Path(path).resolve(), Path(lake.root).resolve()
        if target == home or home in target.parents:
            raise ExportError(f"--to {destination} lies inside the lake {lake.home}; export outside it")
    elif type(fs) is type(lake.fs) and f"{path.rstrip('/')}/".startswith(f"{lake.root.rstrip('/')}/"):
        # The same object store: keys, no links, so the prefix says it.
        raise ExportError(f"--to {destination} lies inside the lake {lake.home}; export outside it")
    return fs, path.rstrip("/") or path


def _tmp_beside(path: str) -> str:
    head, _, tail = path.rpartition("/")
    return f"{head}/.tmp-{tail}-{uuid.uuid4().hex[:12]}"


def _place(fs: fsspec.AbstractFileSystem, tmp: str, path: str) -> None:
    """Move a finished temp file to its name: readers see the whole file or none."""
    if isinstance(fs, fsspec.implementations.local.LocalFileSystem):
        os.replace(tmp, path)
    else:
        fs.mv(tmp, path)


# ---------------------------------------------------------------------- streaming
class _CheckedReader:
    """A source file read in chunks, hashed as it goes: `check` says whether the bytes read were
    the ones its manifest names (a file altered in the lake is never exported as good)."""

    def __init__(self, handle: BinaryIO, rel: str, entry: dict[str, Any], where: str) -> None:
        self._handle, self.rel, self._entry, self._where = handle, rel, entry, where
        self._digest, self.size = hashlib.sha256(), 0

    def read(self, n: int = -1) -> bytes:
        data = self._handle.read(CHUNK if n is None or n < 0 else min(n, CHUNK))
        self._digest.update(data)
        self.size += len(data)
        return data

    def check(self) -> None:
        if self._digest.hexdigest() != self._entry.get("sha256") or self.size != self._entry.get("size"):
            raise ExportError(f"{self._where}: {self.rel} does not match its manifest checksum")


def _copy(src: BinaryIO, out: BinaryIO) -> None:
    while chunk := src.read(CHUNK):
        out.write(chunk)


def _digest(handle: BinaryIO) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    while chunk := handle.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _check_digests(manifest: dict[str, Any], digests: dict[str, tuple[str, int]], where: str) -> None:
    listed = set(manifest["files"])
    if set(digests) != listed:
        missing, extra = sorted(listed - set(digests)), sorted(set(digests) - listed)
        raise ExportError(f"{where}: missing {missing} extra {extra}")
    for rel, entry in manifest["files"].items():
        if digests[rel] != (entry.get("sha256"), entry.get("size")):
            raise ExportError(f"{where}: {rel} does not match its manifest checksum")


# ---------------------------------------------------------------------- export
def export_release(lake: Lake, version: str, destination: str) -> ExportResult:
    version = resolve_version(lake, version)
    record = withdrawal(lake, version)
    if record is not None:  # a withdrawn release is never served again (docs/takedown.md)
        raise ReleaseWithdrawn(version, record)
    fs, root = destination_fs(destination, lake)
    manifest = read_manifest(lake, version)
    for rel in manifest["files"]:
        safe_relative_path(rel)
    base = release_dir(lake, version)
    manifest_bytes = lake.fs.cat_file(f"{base}/{MANIFEST}")
    held = takedown_hits(lake, base, manifest["files"], load_takedowns(lake))
    if held:
        rows = sum(held.values())
        raise ExportError(
            f"release {version} holds {rows} rows on the takedown list ({', '.join(sorted(held))}); a "
            f"published release never changes: `release correct {version} --reason ...` makes its "
            "correction without them, export that"
        )
    total = sum(int(entry["size"]) for entry in manifest["files"].values()) + len(manifest_bytes)
    files = len(manifest["files"]) + 1
    if destination.endswith(".tar"):
        done = _export_tar(lake, version, base, manifest, manifest_bytes, fs, root, destination)
        return ExportResult(version, destination, files, total, done)
    target = f"{root}/{version}"
    where = f"{destination.rstrip('/')}/{version}"
    if fs.exists(f"{target}/{MANIFEST}"):
        if fs.cat_file(f"{target}/{MANIFEST}") != manifest_bytes:
            raise ExportError(
                f"{destination} already holds a different snapshot of {version}; refusing to overwrite"
            )
        _verify_folder(fs, target, manifest, where)
        return ExportResult(version, where, files, total, True)
    if fs.exists(target) and fs.ls(target):
        raise ExportError(f"{destination}/{version} exists without a manifest; refusing to write into it")
    for rel in sorted(manifest["files"]):  # data first, the manifest last: it is the commit point
        path = f"{target}/{rel}"
        fs.makedirs(path.rpartition("/")[0], exist_ok=True)
        tmp = _tmp_beside(path)
        try:
            with lake.fs.open(f"{base}/{rel}", "rb") as src, fs.open(tmp, "wb") as out:
                reader = _CheckedReader(src, rel, manifest["files"][rel], f"release {version} in the lake")
                _copy(reader, out)  # type: ignore[arg-type]
            reader.check()
            _place(fs, tmp, path)
        finally:
            if fs.exists(tmp):
                fs.rm_file(tmp)
    atomic_write_bytes(fs, f"{target}/{MANIFEST}", manifest_bytes)
    _verify_folder(fs, target, manifest, where)
    removed = _remove_superseded(lake, manifest, fs, root)
    return ExportResult(version, where, files, total, False, removed)


def _verify_folder(fs: fsspec.AbstractFileSystem, target: str, manifest: dict[str, Any], where: str) -> None:
    present = {p[len(target) + 1 :] for p in fs.find(target)} - {MANIFEST}
    digests = {}
    for rel in present:
        with fs.open(f"{target}/{rel}", "rb") as handle:
            digests[rel] = _digest(handle)
    _check_digests(manifest, digests, where)


def _remove_superseded(
    lake: Lake, manifest: dict[str, Any], fs: fsspec.AbstractFileSystem, root: str
) -> list[str]:
    """A takedown reaches copies already exported: exporting a correction into a folder that holds
    the export of the version it supersedes (the very bytes of its lake manifest) removes it."""
    old = manifest.get("supersedes")
    if not isinstance(old, str):
        return []
    try:
        old_manifest = lake.fs.cat_file(f"{release_dir(lake, old)}/{MANIFEST}")
    except FileNotFoundError:
        return []
    path = f"{root}/{old}"
    try:
        there = fs.cat_file(f"{path}/{MANIFEST}")
    except FileNotFoundError:
        return []
    if there != old_manifest:
        return []  # not our export of it: never touched
    fs.rm_file(f"{path}/{MANIFEST}")  # first: the copy stops being a release at once
    fs.rm(path, recursive=True)
    return [old]


def _export_tar(
    lake: Lake,
    version: str,
    base: str,
    manifest: dict[str, Any],
    manifest_bytes: bytes,
    fs: fsspec.AbstractFileSystem,
    path: str,
    destination: str,
) -> bool:
    """Stream the release into `path` as a tar; True when the same snapshot was already there."""
    if fs.exists(path):
        with fs.open(path, "rb") as handle:
            existing, digests = _read_tar(handle, version)
        if existing != manifest_bytes:
            raise ExportError(f"{destination} already holds a different snapshot; refusing to overwrite")
        _check_digests(manifest, digests, destination)
        return True
    tmp = _tmp_beside(path)
    try:
        with fs.open(tmp, "wb") as out, tarfile.open(fileobj=out, mode="w|") as tar:
            for rel in sorted(manifest["files"]):
                entry = manifest["files"][rel]
                with lake.fs.open(f"{base}/{rel}", "rb") as src:
                    reader = _CheckedReader(src, rel, entry, f"release {version} in the lake")
                    tar.addfile(_member(version, rel, int(entry["size"])), reader)
                reader.check()
            tar.addfile(_member(version, MANIFEST, len(manifest_bytes)), _Bytes(manifest_bytes))
        _place(fs, tmp, path)
    finally:
        if fs.exists(tmp):
            fs.rm_file(tmp)
    with fs.open(path, "rb") as handle:
        written, digests = _read_tar(handle, version)
    if written != manifest_bytes:
        raise ExportError(f"{destination}: {MANIFEST} does not match the release's")
    _check_digests(manifest, digests, destination)
    return False


def _member(version: str, rel: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(f"{version}/{rel}")
    info.size = size
    info.mtime = 0  # reproducible archives
    return info


class _Bytes:
    """The manifest (small, already in memory) as a file for `tarfile.addfile`."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n is None or n < 0 else self._at + n
        chunk, self._at = self._data[self._at : end], min(end, len(self._data))
        return chunk


def _read_tar(handle: BinaryIO, version: str) -> tuple[bytes | None, dict[str, tuple[str, int]]]:
    """(manifest bytes, rel -> (sha256, size) of every other member), streamed member by member."""
    manifest: bytes | None = None
    digests: dict[str, tuple[str, int]] = {}
    with tarfile.open(fileobj=handle, mode="r|") as tar:
        for member in _members(tar):
            # Only regular files under the version folder; never follow links or leave it.
            if (
                not member.isfile()
                or not member.name.startswith(f"{version}/")
                or ".." in member.name.split("/")
            ):
                raise ExportError(f"unexpected archive member {member.name!r}")
            data = tar.extractfile(member)
            assert data is not None
            rel = member.name[len(version) + 1 :]
            if rel == MANIFEST:
                if member.size > MAX_MANIFEST:  # a manifest is kilobytes; a larger one is not ours
                    raise ExportError(f"archive member {member.name!r} is too large to be a manifest")
                manifest = data.read()
            else:
                digests[rel] = _digest(data)  # type: ignore[arg-type]
    return manifest, digests


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (member := tar.next()) is not None:
        yield member
