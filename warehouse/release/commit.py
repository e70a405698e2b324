"""Committing a staged release: the manifest, verification, the atomic commit (a rename on a local
lake; files then a conditional manifest PUT on an object store), `LATEST` last; undoing what a
killed build left (`reconcile_releases`); withdrawals. See the package's docstring for the rules."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Any

from lookbench_live import __version__
from lookbench_live.schema.committed import (
    LOCATION_KEY,
    ReleaseError,
    ReleaseWithdrawn,
    _location,
    _version_path,
    _withdrawn_path,
    check_earlier_releases,
    check_version,
    committed_versions,
    is_published,
    newest_published,
    read_latest,
    read_manifest,
    releases_root,
    resolve_version,
    withdrawal,
)
from lookbench_live.schema.release import LATEST, MANIFEST, next_revision, version_key
from lookbench_live.schema.verify import _list_files, file_digest, verify_path
from lookbench_live.warehouse.lake import Lake, atomic_write_bytes
from lookbench_live.warehouse.release.rows import StagedRelease, _disk_full_is_reported, _put
from lookbench_live.warehouse.released import write_index


class ReleaseExists(ReleaseError):
    """The version is already committed (found before staging, or committed meanwhile)."""

    def __init__(self, lake: Lake, version: str):
        self.version = version
        super().__init__(
            f"release {version} already exists in {lake.home}; a published release never changes: "
            f"`release correct {version}` makes its correction (or `--replace` a held-back one)"
        )


class ReleasePublished(ReleaseError):
    """A rebuild in place (`replace`) of a published release: refused. A committed release whose
    gate passed (or had none) is a publication consumers may hold; only a release held back by
    the content check or the gate may be rebuilt under its own name. A correction is a new
    version (`next_revision`), a takedown of the whole release a withdrawal."""

    def __init__(self, lake: Lake, version: str):
        self.version = version
        super().__init__(
            f"release {version} in {lake.home} is published and its bytes never change; "
            f"`release correct {version}` makes its correction {next_revision(version, committed_versions(lake))}, "
            f"`release withdraw {version} --reason ...` withdraws it"
        )


@dataclass(slots=True)
class BuildResult:
    version: str
    path: str
    rows: dict[str, int]
    dropped: dict[str, int]
    published_latest: bool
    latest_reason: str
    manifest: dict[str, Any] = field(default_factory=dict)


def withdraw_release(lake: Lake, version: str, reason: str) -> dict[str, Any]:
    """Withdraw a committed release (a legal takedown, a wrong gate): its bytes stay in the lake
    (the record of what was published), but it leaves `latest`, ranges and exports, and
    `export` refuses it. The record (`releases/withdrawn/<version>.json`: reason, time) is
    written once; `LATEST` then moves to the newest published release left (or goes). Run under
    the writer lock."""
    version = check_version(version)
    if not reason.strip():
        raise ReleaseError("a withdrawal needs a reason (--reason)")
    if not lake.fs.exists(f"{_version_path(lake, version)}/{MANIFEST}"):
        raise ReleaseError(f"release {version} does not exist in {lake.home} (no {MANIFEST})")
    existing = withdrawal(lake, version)
    if existing is not None:
        raise ReleaseWithdrawn(version, existing)
    record = {
        "version": version,
        "reason": reason.strip(),
        "withdrawn_at": dt.datetime.now(dt.UTC).isoformat(),
    }
    atomic_write_bytes(lake.fs, _withdrawn_path(lake, version), json.dumps(record, indent=2).encode())
    if read_latest(lake) == version:
        successor = newest_published(lake)
        pointer = lake.path("releases", LATEST)
        if successor is None:
            lake.fs.rm_file(pointer)
        else:
            atomic_write_bytes(lake.fs, pointer, json.dumps({"version": successor}).encode())
    return record


def _fault_point(step: str) -> None:
    """A named step of an object-store commit; tests replace this to kill or fail a build there."""


def reconcile_releases(lake: Lake) -> list[str]:
    """Undo what killed builds left: staging folders go, a release a killed `replace` had moved
    aside (local) or copied aside (object store) comes back, and on object stores the files of a
    version that never got its manifest are deleted. Safe only under the writer lock."""
    root = releases_root(lake)
    if not lake.fs.exists(root):
        return []
    actions = []
    listed = sorted(lake.fs.ls(root, detail=False))
    for path in listed:
        name = os.path.basename(path.rstrip("/"))
        if name.startswith(".staging-"):
            lake.fs.rm(path, recursive=True)
            actions.append(f"removed {name}")
        elif name.startswith(".previous-"):
            version = name.split("-")[1]
            target = _version_path(lake, version)
            committed = lake.fs.exists(f"{target}/{MANIFEST}")
            if committed and _location(lake, target, version) != name:
                # The new manifest committed, or the old one was never redirected (no file touched).
                lake.fs.rm(path, recursive=True)
                actions.append(f"removed {name}")
            else:
                _restore_object_store(lake, path, target)
                actions.append(f"restored {version}")
        elif name.startswith(".trash-"):
            version = name.split("-")[1]
            target = _version_path(lake, version)
            if not lake.fs.exists(f"{target}/{MANIFEST}"):
                if lake.fs.exists(target):
                    lake.fs.rm(target, recursive=True)
                lake.fs.mv(path, target, recursive=True)
                actions.append(f"restored {version}")
            else:
                lake.fs.rm(path, recursive=True)
                actions.append(f"removed {name}")
    if not lake.local:
        for path in listed:
            name = os.path.basename(path.rstrip("/"))
            if name.startswith("v") and not lake.fs.exists(f"{path.rstrip('/')}/{MANIFEST}"):
                # Files of a publish killed before its manifest: never a release, in the way of the rerun.
                lake.fs.rm(path, recursive=True)
                actions.append(f"removed uncommitted {name}")
    return actions


def _restore_object_store(lake: Lake, backup: str, target: str) -> None:
    """Put back a release a killed object-store `replace` had copied aside; its manifest goes last."""
    kept = _list_files(lake, backup)
    for rel in kept:
        if rel != MANIFEST:
            lake.fs.copy(f"{backup}/{rel}", f"{target}/{rel}")
    for rel in set(_list_files(lake, target)) - set(kept):
        lake.fs.rm_file(f"{target}/{rel}")  # files only the killed build wrote
    if MANIFEST in kept:
        # Over the manifest that pointed readers at the copy (or none, by an older build): the
        # old release is whole again at its own path before the copy goes.
        atomic_write_bytes(lake.fs, f"{target}/{MANIFEST}", lake.fs.cat_file(f"{backup}/{MANIFEST}"))
    lake.fs.rm(backup, recursive=True)


def _put_if_absent(lake: Lake, path: str, data: bytes) -> bool:
    """One conditional PUT (If-None-Match: *, as the lake's writer lock uses); False if the key exists."""
    from lookbench_live.warehouse.lake import _precondition_failed

    try:
        lake.fs.pipe_file(path, data, mode="create")
    except (FileExistsError, OSError) as exc:
        if _precondition_failed(exc):
            return False
        raise
    return True


def commit_release(
    lake: Lake,
    staged: StagedRelease,
    extra_manifest: dict[str, Any] | None = None,
    *,
    publish_latest: bool = True,
    latest_reason: str = "",
) -> BuildResult:
    """Write the manifest of a staged release, verify it and commit it; `LATEST` moves last.

    Files added to the staging folder since staging (the report) are checksummed and listed.
    `extra_manifest` is merged into the manifest (audit, evaluation, sites, gate). A failed
    gate (`{"gate": {"passed": False, ...}}`) keeps `LATEST` where it is. Raises
    `ReleaseExists` when the version was committed meanwhile and `staged.replace` is false.
    """
    version, target = staged.version, staged.target
    check_earlier_releases(lake, version)  # nothing is committed on top of a damaged LATEST
    extra: dict[str, Any] = dict(extra_manifest or {})
    gate = extra.get("gate")
    if isinstance(gate, dict) and gate.get("passed") is False:
        # Built and kept, but not published as latest: the audit said the labels are not good enough.
        publish_latest = False
        latest_reason = str(gate.get("reason", "release gate failed"))
    exists = lake.fs.exists(f"{target}/{MANIFEST}")
    _check_rebuild(lake, version, target, staged.replace)  # committed meanwhile?
    for rel in _list_files(lake, staged.path):
        if rel not in staged.files and rel != MANIFEST:
            _put(lake, staged, rel, lake.fs.cat_file(f"{staged.path}/{rel}"))
    manifest = {
        **staged.info,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "code_version": __version__,
        "annotation_mode": staged.annotation_mode,
        "dropped_by_reason": staged.dropped,
        "files": dict(sorted(staged.files.items())),
        **extra,
    }
    manifest_bytes = json.dumps(manifest, indent=2, sort_keys=True).encode()
    with _disk_full_is_reported(lake, version, staged.path):
        atomic_write_bytes(lake.fs, f"{staged.path}/{MANIFEST}", manifest_bytes)
        problems = verify_path(lake, staged.path)
        if problems:
            raise ReleaseError(f"release {version} failed verification before commit: {problems[0]}")
        if lake.local:
            _commit_local(lake, staged.path, target, version, exists)
        else:
            _commit_object_store(lake, staged, manifest_bytes, exists)
    # The released-image index is a cache: a kill here leaves it missing, and readers rebuild it.
    write_index(lake, version, target, staged.hashes)
    if publish_latest:
        try:
            current = resolve_version(lake, "latest")
        except ReleaseError:
            current = None
        if current is not None and version_key(current) > version_key(version):
            # A backfill of an older window never moves `latest` backwards.
            publish_latest, latest_reason = False, f"{current} is newer and stays latest"
        else:
            atomic_write_bytes(
                lake.fs, lake.path("releases", LATEST), json.dumps({"version": version}).encode()
            )
    return BuildResult(
        version=version,
        path=lake.url("releases", version),
        rows=staged.rows,
        dropped=staged.dropped,
        published_latest=publish_latest,
        latest_reason=latest_reason,
        manifest=manifest,
    )


def _check_rebuild(lake: Lake, version: str, target: str, replace: bool) -> None:
    """The one rule for building over a committed version: `ReleaseExists` without `replace`,
    `ReleasePublished` with it unless the committed release was held back (content check, gate)."""
    if not lake.fs.exists(f"{target}/{MANIFEST}"):
        return
    if not replace:
        raise ReleaseExists(lake, version)
    withdrawn = withdrawal(lake, version)
    if withdrawn is not None:  # its bytes are the record of what was published and withdrawn
        raise ReleaseWithdrawn(version, withdrawn)
    if is_published(read_manifest(lake, version)):
        raise ReleasePublished(lake, version)


# Publishing on an object store copies staged files in parts of this size (S3's multipart
# minimum is 5 MiB; s3fs buffers one part).
PUBLISH_CHUNK = 8 << 20


def _commit_local(lake: Lake, staging: str, target: str, version: str, exists: bool) -> None:
    trash = None
    if exists or os.path.exists(target):
        trash = lake.path("releases", f".trash-{version}-{uuid.uuid4().hex[:12]}")
        os.replace(target, trash)
    os.replace(staging, target)
    fd = os.open(os.path.dirname(target), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if trash:
        shutil.rmtree(trash, ignore_errors=True)


def _publish_file(lake: Lake, source: str, path: str, *, exclusive: bool) -> bool:
    """Copy a staged file to its published path in `PUBLISH_CHUNK` pieces (a noise gallery may be
    gigabytes: never whole in memory). The object appears whole or not at all: one PUT, or a
    multipart upload that only its completion makes visible; a failed copy aborts the upload.
    `exclusive`: a conditional write (If-None-Match: *, on the PUT or on the multipart
    completion); False when the key already exists."""
    from lookbench_live.warehouse.lake import _precondition_failed

    out = lake.fs.open(path, "xb" if exclusive else "wb", block_size=PUBLISH_CHUNK)
    try:
        with lake.fs.open(source, "rb") as handle:
            shutil.copyfileobj(handle, out, PUBLISH_CHUNK)
    except BaseException:
        out.discard()  # abort the multipart upload: nothing half-copied becomes an object
        out.closed = True  # and closing later (or garbage collection) must not complete it
        raise
    try:
        out.close()  # the upload completes here
    except (FileExistsError, OSError) as exc:
        if exclusive and _precondition_failed(exc):
            return False
        raise
    return True


def _commit_object_store(lake: Lake, staged: StagedRelease, manifest_bytes: bytes, exists: bool) -> None:
    """Publish a verified staging folder without rename; `manifest.json` last, put-if-absent.

    S3 has no rename and no multi-object transaction, and the published names are fixed
    (`vYYYYMMDD/<subset>/<split>.parquet`), so a replace overwrites the files in place. The old
    release stays readable throughout: it is copied aside and verified first, then its manifest
    is rewritten to point readers at the copy (`location`, see `release_dir`), and only then are
    its files overwritten; the new manifest replaces the pointer last. A kill leaves either the
    old release (read from the copy, put back by `reconcile_releases`) or the new one.
    """
    version, target, staging = staged.version, staged.target, staged.path
    backup = None
    redirect = b""
    if exists:
        backup = lake.path("releases", f".previous-{version}-{uuid.uuid4().hex[:12]}")
        old = _list_files(lake, target)
        for rel in old:
            lake.fs.copy(f"{target}/{rel}", f"{backup}/{rel}")
        problems = verify_path(lake, backup)
        if problems:
            lake.fs.rm(backup, recursive=True)
            raise ReleaseError(
                f"release {version}: could not keep a sound copy of the old release: {problems[0]}"
            )
        _fault_point("replace_copied_old")
        old_manifest = json.loads(lake.fs.cat_file(f"{backup}/{MANIFEST}"))
        redirect = json.dumps(
            {**old_manifest, LOCATION_KEY: os.path.basename(backup)}, indent=2, sort_keys=True
        ).encode()
        # From here readers (release_dir) read the verified copy: the old release, whole.
        atomic_write_bytes(lake.fs, f"{target}/{MANIFEST}", redirect)
        _fault_point("replace_redirected")
    for rel, entry in staged.files.items():
        path = f"{target}/{rel}"
        if exists:
            _publish_file(lake, f"{staging}/{rel}", path, exclusive=False)
        elif (
            not _publish_file(lake, f"{staging}/{rel}", path, exclusive=True)
            and file_digest(lake, path)[0] != entry["sha256"]
        ):
            # Another writer is publishing other bytes under this version: it may win, we may not.
            raise ReleaseExists(lake, version)
    if exists:
        for rel in set(_list_files(lake, target)) - set(staged.files) - {MANIFEST}:
            lake.fs.rm_file(f"{target}/{rel}")  # a file only the old release had
    _fault_point("before_manifest")
    if exists:
        # The swap: only over our own pointer (the writer lock keeps others out; this read says
        # nobody went around it). Then the new release is what the version's path holds.
        if lake.fs.cat_file(f"{target}/{MANIFEST}") != redirect:
            raise ReleaseError(
                f"release {version}: its manifest changed during the replace (another writer?); the old "
                f"release is kept at {backup}"
            )
        atomic_write_bytes(lake.fs, f"{target}/{MANIFEST}", manifest_bytes)
    elif not _put_if_absent(lake, f"{target}/{MANIFEST}", manifest_bytes):
        # Committed meanwhile by another writer: its manifest stays; ours is never written.
        lake.fs.rm(staging, recursive=True)
        raise ReleaseExists(lake, version)
    problems = verify_path(lake, target)
    if problems:
        raise ReleaseError(
            f"release {version} was committed but does not verify (another writer published at the "
            f"same time?): {problems[0]}; run `release build --replace`"
        )
    if backup is not None:
        lake.fs.rm(backup, recursive=True)
    lake.fs.rm(staging, recursive=True)
