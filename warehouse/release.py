"""Build, commit, resolve and verify releases.

A release is `releases/vYYYYMMDD/` under the lake root, and it exists only if its
`manifest.json` exists: readers never trust a directory listing. Publishing follows
the Delta/Iceberg rule:
- every build writes to `releases/.staging-<version>-<id>/`, writes the manifest there and
  verifies it (checksums, row counts) before anything appears at the version's path;
- local lakes: the verified folder is renamed into place in one step; `releases/LATEST` last;
- object stores (no rename): the verified files are written under the version's path, then
  `manifest.json` with a conditional PUT (If-None-Match: *), so of two committers exactly one
  wins. `--replace` first copies the old release to `releases/.previous-<version>-<id>/` and
  verifies the copy, then rewrites the old manifest to point readers at the copy (`location`;
  `release_dir` follows it), overwrites the files and swaps in the new manifest last: the old
  release stays readable until the new one commits, never a mix. A kill in between is undone by
  `reconcile_releases`, which puts the old release back at its own path from the copy.

A killed build leaves only a staging folder (and on object stores uncommitted files or a
`.previous-` copy), which the next build reconciles. Building into an existing version refuses
unless `replace=True`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lookbench_live import __version__
from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.records import Rejection
from lookbench_live.schema.release import (
    FILES,
    LATEST,
    MANIFEST,
    RELEASE_SCHEMA,
    WITHDRAWN,
    ReleaseKeyError,
    VersionError,
    check_file_key,
    features_fault,
    next_revision,
    parse_version,
    version_base,
    version_key,
)
from lookbench_live.warehouse.assemble import Assembler, Window, materialize, ordered_rows
from lookbench_live.warehouse.card import croissant_json, dataset_card
from lookbench_live.warehouse.freshness import (
    DEFAULT_CADENCE_DAYS,
    FRESHNESS_RULES_VERSION,
    FreshnessRules,
    default_window,
    site_baselines,
)
from lookbench_live.warehouse.labels import LabelRules
from lookbench_live.warehouse.lake import PARQUET_OPTIONS, Lake, atomic_local_file, atomic_write_bytes
from lookbench_live.warehouse.photo_type import PhotoTypeRule
from lookbench_live.warehouse.released import (
    ReleasedIndex,
    gate_passed,
    gate_status,
    released_index,
    write_index,
)
from lookbench_live.warehouse.takedown import takedown_filter
from lookbench_live.warehouse.views import LakeView, lake_view

__all__ = [
    "FILES",
    "LATEST",
    "MANIFEST",
    "BuildResult",
    "DamagedRelease",
    "ReleaseError",
    "ReleaseExists",
    "ReleasePublished",
    "ReleaseWithdrawn",
    "StagedRelease",
    "build_release",
    "commit_release",
    "gate_passed",
    "gate_status",
    "lake_view",
    "stage_release",
]


class ReleaseError(RuntimeError):
    """A release cannot be built, found or verified; the message names the version or file."""


class DamagedRelease(ReleaseError):
    """A committed release whose manifest cannot be read (empty, not JSON, not an object, files or
    rows listed wrongly), or a `LATEST` pointer that names no version (`version` is then `LATEST`).

    Readers of one release (query, `release list`, `release verify`) name it and go on with the
    others; every step that must see all earlier releases (the released-image index, stage,
    commit, export) stops on it, and nothing is committed on top of a damaged `LATEST`.
    """

    def __init__(self, version: str, path: str, reason: str):
        self.version, self.path, self.reason = version, path, reason
        what = "the LATEST pointer" if version == LATEST else f"release {version}"
        super().__init__(f"{what} is damaged: {path} {reason}")


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


class ReleaseWithdrawn(ReleaseError):
    """The release was withdrawn (`withdraw_release`): it is not served, exported or ranged."""

    def __init__(self, version: str, record: dict[str, Any]):
        self.version, self.record = version, record
        super().__init__(
            f"release {version} was withdrawn at {record.get('withdrawn_at')}: {record.get('reason')}"
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


# ---------------------------------------------------------------------- naming
def version_for(day: dt.date) -> str:
    return f"v{day:%Y%m%d}"


def check_version(version: str) -> str:
    """`version` when it is `vYYYYMMDD` or a correction `vYYYYMMDD.N` (`schema.release.parse_version`)."""
    try:
        parse_version(version)
    except VersionError as exc:
        raise ReleaseError(str(exc)) from exc
    return version


def releases_root(lake: Lake) -> str:
    return lake.path("releases")


def _version_path(lake: Lake, version: str) -> str:
    """The version's own folder, where it is published and committed (writers use this)."""
    return lake.path("releases", check_version(version))


# In a manifest at the version's path: the release's files are read from this sibling folder
# instead (the verified copy of the old release while an object-store `--replace` runs).
LOCATION_KEY = "location"


def release_dir(lake: Lake, version: str) -> str:
    """Where a version's files are read: its own folder, or, while an object-store `--replace`
    of it is running (or was killed before its new manifest), the verified copy of the old
    release that its manifest points to (`location`). Local lakes replace by rename: never."""
    path = _version_path(lake, version)
    if lake.local:
        return path
    location = _location(lake, path, version)
    return lake.path("releases", location) if location else path


def _location(lake: Lake, path: str, version: str) -> str | None:
    try:
        manifest = json.loads(lake.fs.cat_file(f"{path}/{MANIFEST}"))
    except (FileNotFoundError, ValueError):
        return None
    location = manifest.get(LOCATION_KEY) if isinstance(manifest, dict) else None
    if isinstance(location, str) and location.startswith(f".previous-{version}-") and "/" not in location:
        return location
    return None


def committed_versions(lake: Lake) -> list[str]:
    """Versions whose manifest exists, oldest first: sound or damaged (`read_manifest` says which)."""
    root = releases_root(lake)
    if not lake.fs.exists(root):
        return []
    found = []
    for path in lake.fs.ls(root, detail=False):
        name = os.path.basename(path.rstrip("/"))
        if name.startswith("v") and lake.fs.exists(f"{path.rstrip('/')}/{MANIFEST}"):
            try:
                found.append(check_version(name))
            except ReleaseError:
                continue
    return sorted(found, key=version_key)


def is_published(manifest: dict[str, Any]) -> bool:
    """A committed release is published unless the content check or the gate held it back."""
    return gate_passed(manifest)


def _withdrawn_path(lake: Lake, version: str) -> str:
    return lake.path("releases", WITHDRAWN, f"{check_version(version)}.json")


def withdrawal(lake: Lake, version: str) -> dict[str, Any] | None:
    """The withdrawal record of `version` (reason, time), or None when it was not withdrawn.
    An unreadable record counts as a withdrawal (fails closed: a takedown must not come back)."""
    try:
        data = lake.fs.cat_file(_withdrawn_path(lake, version))
    except FileNotFoundError:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return {"version": version, "reason": "unreadable withdrawal record", "withdrawn_at": None}
    return record


def withdrawn_versions(lake: Lake) -> set[str]:
    """Committed versions that were withdrawn."""
    return {v for v in committed_versions(lake) if withdrawal(lake, v) is not None}


def release_order_key(name: str) -> tuple[int, tuple[dt.date, int] | str]:
    """`version_key` for a version name; a name that is none (an old evaluation row) sorts first."""
    try:
        return 1, version_key(name)
    except VersionError:
        return 0, name


def current_versions(lake: Lake) -> list[str]:
    """Committed versions that were not withdrawn, in `version_key` order: what `latest`,
    `--releases A..B`, the leaderboard and exports choose from."""
    return [v for v in committed_versions(lake) if withdrawal(lake, v) is None]


def newest_published(lake: Lake) -> str | None:
    """The newest current (not withdrawn) release whose gate passed, or None."""
    for version in reversed(current_versions(lake)):
        if is_published(read_manifest(lake, version)):
            return version
    return None


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


def resolve_version(lake: Lake, version: str) -> str:
    """`latest` through the LATEST pointer; a named version must be committed."""
    if version == "latest":
        latest = read_latest(lake)
        if latest is None:
            raise ReleaseError(f"no release is published as latest in {lake.home}; build one first")
        version = latest
    if not lake.fs.exists(f"{_version_path(lake, version)}/{MANIFEST}"):
        kept = [p for p in _listing(lake) if os.path.basename(p).startswith(f".previous-{version}-")]
        if kept:
            raise ReleaseError(
                f"release {version} is unavailable in {lake.home} (no {MANIFEST}): a --replace of it is "
                f"running or was killed; its previous release is kept at {kept[0]} and the next "
                "`release build` (any writer's reconcile) puts it back"
            )
        raise ReleaseError(f"release {version} does not exist in {lake.home} (no {MANIFEST})")
    return version


def _listing(lake: Lake) -> list[str]:
    try:
        return [p.rstrip("/") for p in lake.fs.ls(releases_root(lake), detail=False)]
    except FileNotFoundError:
        return []


def read_latest(lake: Lake) -> str | None:
    """The version `releases/LATEST` names; None when there is no `LATEST`. `DamagedRelease`
    (naming the file) when it is empty, not JSON or names no valid version: nothing may be
    published or committed on top of it."""
    pointer = lake.path("releases", LATEST)
    try:
        data = lake.fs.cat_file(pointer)
    except FileNotFoundError:
        return None
    fix = '; write {"version": "vYYYYMMDD"} of a committed release to it, or remove it'
    if not data.strip():
        raise DamagedRelease(LATEST, pointer, "is empty" + fix)
    try:
        content = json.loads(data)
    except ValueError as exc:  # not UTF-8, not JSON
        raise DamagedRelease(LATEST, pointer, f"is not valid JSON ({exc}){fix}") from exc
    version = content.get("version") if isinstance(content, dict) else None
    if not isinstance(version, str):
        raise DamagedRelease(LATEST, pointer, f'holds no "version" string{fix}')
    try:
        return check_version(version)
    except ReleaseError as exc:
        raise DamagedRelease(LATEST, pointer, f"names {version!r}, not a release version{fix}") from exc


def parse_manifest(data: bytes, version: str, path: str) -> dict[str, Any]:
    """A manifest's content, checked for the shape readers rely on (an object whose `files` maps
    keys to entries and whose `rows` maps keys to counts); `DamagedRelease` naming `path` else.
    The keys themselves are checked where they are used, by `check_file_key`."""
    if not data.strip():
        raise DamagedRelease(version, path, "is empty")
    try:
        manifest = json.loads(data)
    except ValueError as exc:  # not UTF-8, not JSON
        raise DamagedRelease(version, path, f"is not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict):
        raise DamagedRelease(version, path, f"holds a JSON {type(manifest).__name__}, not an object")
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(isinstance(entry, dict) for entry in files.values()):
        raise DamagedRelease(version, path, "has no `files` object of file entries")
    rows = manifest.get("rows", {})
    if not isinstance(rows, dict) or not all(type(n) is int and n >= 0 for n in rows.values()):
        raise DamagedRelease(version, path, "has a `rows` that is not an object of row counts")
    return manifest


def read_manifest(lake: Lake, version: str) -> dict[str, Any]:
    """The committed release's manifest; `ReleaseError` when it is missing, `DamagedRelease`
    (naming the file) when it cannot be read (`parse_manifest`)."""
    path = f"{release_dir(lake, version)}/{MANIFEST}"
    try:
        data = lake.fs.cat_file(path)
    except FileNotFoundError as exc:
        raise ReleaseError(f"release {version}: {MANIFEST} is missing") from exc
    except (IsADirectoryError, NotADirectoryError) as exc:
        raise DamagedRelease(version, path, "is not a file") from exc
    return parse_manifest(data, version, path)


def check_earlier_releases(lake: Lake, version: str) -> None:
    """Every committed release before `version` has a readable manifest whose keys are files of
    the release format, and `LATEST` is sound: else `DamagedRelease` naming the first that is not.
    For the steps that must see all earlier releases (stage, commit): they fail closed."""
    read_latest(lake)
    for earlier in committed_versions(lake):
        if version_key(earlier) < version_key(version):
            manifest_files(lake, earlier, read_manifest(lake, earlier))


def manifest_files(lake: Lake, version: str, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The manifest's `files`, every key a file of the release format (`check_file_key`); a key
    that is not one makes the release `DamagedRelease` (for the steps that fail closed)."""
    files: dict[str, dict[str, Any]] = manifest["files"]
    for key in files:
        try:
            check_file_key(key, release=version)
        except ReleaseKeyError as exc:
            path = f"{release_dir(lake, version)}/{MANIFEST}"
            raise DamagedRelease(version, path, f"lists {key!r}, not a file of the release format") from exc
    return files


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


# ---------------------------------------------------------------------- building
def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


@dataclass(slots=True)
class StagedRelease:
    """A release written to its staging folder (data files, card, Croissant), not yet committed.

    Later steps may add files to `path` (the report); `commit_release` lists and checksums
    every file there, writes the manifest, verifies and commits.
    """

    version: str
    path: str  # staging folder on lake.fs
    target: str
    replace: bool
    info: dict[str, Any]  # the manifest's description of the data (window, rows, models)
    files: dict[str, dict[str, Any]]  # rel -> {sha256, size[, rows]} of the files written so far
    dropped: dict[str, int]
    annotation_mode: str
    hashes: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # for the released-image index

    @property
    def rows(self) -> dict[str, int]:
        return dict(self.info["rows"])


def _taxonomy(taxonomy: Any) -> Any:
    if taxonomy is None:
        from lookbench_live.schema.taxonomy import default_taxonomy

        taxonomy = default_taxonomy()
    return taxonomy


def stage_release(
    lake: Lake,
    *,
    version: str | None = None,
    window: Window = Window(),
    replace: bool = False,
    query_share: float = 0.5,
    max_gallery: int = 4,
    seed: int = 0,
    taxonomy: Any = None,
    run_id: str = "manual",
    radius: int = 0,
    view: LakeView | None = None,
    released: ReleasedIndex | None = None,
    contact: str | None = None,
    labels: LabelRules | None = None,
    supersedes: str | None = None,
    photo_type: PhotoTypeRule | None = None,
) -> StagedRelease:
    """Assemble the lake's current content and write it to a staging folder.

    `labels`: the label rules (`warehouse/labels.py`) that decide from the judge's verdicts
    what is published; None publishes the annotations as they are (the staging the audit
    samples), and the card says no rules were applied.

    `contact`: the takedown contact the card and Croissant file print (`Settings.contact`);
    None prints the project's page.

    Raises `ReleaseExists` when the version is committed and `replace` is false, and
    `ReleaseError` when nothing is left to release. `radius`: the dedup radius; a street crop
    within it of an image an earlier release published is held back. `replace` over a published
    release raises `ReleasePublished` (only a held-back release is rebuilt in place).
    `supersedes`: the published version this correction (`vYYYYMMDD.N`) replaces for readers;
    its manifest and card name it. `photo_type`: which photos may be a RealStudioFlat query
    (`warehouse/photo_type.py`); None: the calibrated default threshold.
    """
    taxonomy = _taxonomy(taxonomy)
    version = check_version(version or version_for(dt.datetime.now(dt.UTC).date()))
    check_earlier_releases(lake, version)  # a damaged release or LATEST: refused before any work
    reconcile_releases(lake)
    target = _version_path(lake, version)
    _check_rebuild(lake, version, target, replace)

    view = view if view is not None else lake_view(lake, window=window)
    # A correction re-releases its base's window: the base and its earlier corrections are not
    # "earlier releases" of it (their images would all be held back as already published).
    released = released if released is not None else counted_index(lake, before=version_base(version))
    view.released = set(released.sha_version)
    baselines = site_baselines(lake)  # each site's first crawl: its undated items are never new
    assembly = Assembler(
        view,
        # Every image byte a release holds (rows, crops, pHash takedowns) is re-hashed against
        # its name as it is read: a damaged file stops the build (`ImageCorrupt`), as a missing
        # one does, and is never published.
        lake.get_verified_image,
        window=window,
        query_share=query_share,
        max_gallery=max_gallery,
        seed=seed,
        taxonomy=taxonomy,
        released=released,
        radius=radius,
        takedown=takedown_filter(lake),  # what owners asked to remove never enters a release
        freshness=FreshnessRules(window, baselines),
        photo_type=photo_type,
        failed_looks=labels.failed_looks() if labels is not None else frozenset(),
    ).build()
    if labels is not None:
        kept, held = labels.apply(assembly.rows)
        assembly.rows.clear()
        assembly.rows.update(kept)
        assembly.dropped.extend(held)
    # Rows without image bytes, in file order; the bytes are loaded a row group at a time.
    ordered: dict[str, list[dict[str, Any]]] = {
        rel: ordered_rows(assembly.rows.get(tuple(rel[:-8].split("/")), []))  # type: ignore[arg-type]
        for rel in FILES
    }
    if sum(len(rows) for rows in ordered.values()) == 0:
        raise ReleaseError(
            f"nothing to release in {lake.home} for window {window.as_json()}: no kept, annotated image"
        )
    dropped: dict[str, int] = {}
    for _item, reason, _detail in assembly.dropped:
        dropped[reason] = dropped.get(reason, 0) + 1
    lake.append(
        Rejection(stage="release", item=item, reason=reason, detail=detail, run_id=run_id)
        for item, reason, detail in assembly.dropped
    )

    freshness_info = {
        "freshness_rules": FRESHNESS_RULES_VERSION,
        "held_back": dict(sorted(assembly.held_back.items())),
        "site_baselines": {source: at.isoformat() for source, at in sorted(baselines.items())},
        "releases_before_rules": releases_before_rules(lake, before=version),
    }
    # Object stores too: nothing appears at the version's path before it has verified.
    staging = lake.path("releases", f".staging-{version}-{uuid.uuid4().hex[:12]}")
    staged = StagedRelease(
        version=version,
        path=staging,
        target=target,
        replace=replace,
        info={},
        files={},
        dropped=dropped,
        annotation_mode="vlm" if "vlm" in assembly.annotation_sources else "metadata_prior",
        hashes=assembly.hashes,
    )
    if supersedes is not None:
        staged.info["supersedes"] = check_version(supersedes)
    with _disk_full_is_reported(lake, version, staging):
        _write_staged(lake, staged, ordered, assembly, window, taxonomy, contact, freshness_info, labels)
    return staged


def releases_before_rules(lake: Lake, *, before: str) -> list[str]:
    """Committed releases whose manifest names no freshness rules (built before rules v1): an
    upgraded lake keeps them as they are; the manifest says which they are."""
    out = []
    for version in committed_versions(lake):
        if version < before and "freshness_rules" not in read_manifest(lake, version):
            out.append(version)
    return out


def _write_staged(
    lake: Lake,
    staged: StagedRelease,
    ordered: dict[str, list[dict[str, Any]]],
    assembly: Any,
    window: Window,
    taxonomy: Any,
    contact: str | None,
    freshness_info: dict[str, Any],
    labels: LabelRules | None = None,
) -> None:
    version = staged.version
    for rel, rows in ordered.items():
        _put_rows(lake, staged, rel, rows, lake.get_verified_image)
    staged.info = {
        **staged.info,  # `supersedes`
        "version": version,
        "window": window.as_json(),
        "taxonomy_version": getattr(taxonomy, "version", None),
        "annotation_models": sorted(assembly.annotation_models),
        "annotation_sources": sorted(assembly.annotation_sources),
        "generation_models": sorted(assembly.generation_models),
        "generation_tiny_local": assembly.tiny_generation,
        "rows": {rel: staged.files[rel]["rows"] for rel in FILES},
    }
    if contact:
        staged.info["contact"] = contact
    staged.info.update(freshness_info)
    if labels is not None:
        staged.info["label_rules"] = labels.describe()
        staged.info["labels_corrected"] = labels.corrected
    # What was checked about the rows' images (issue 22 §4 phase B): the photo-type check runs on
    # every staging; the generated-category and conditioned-look checks act with the label rules.
    evidence: dict[str, Any] = {"photo_type": dict(assembly.photo_type)}
    if labels is not None:
        evidence.update(labels.evidence_info())
    else:
        evidence["note"] = "generated-category and conditioned-look checks not applied (no label rules)"
    staged.info["evidence_checks"] = evidence
    _put(lake, staged, "README.md", dataset_card(staged.info).encode())
    _put(lake, staged, "croissant.json", croissant_json(staged.info, staged.files).encode())


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def _disk_full_is_reported(lake: Lake, version: str, staging: str) -> Iterator[None]:
    """A full disk or quota (R3) while a release is staged or committed: the staging folder goes
    (which also frees what it took), and the error says that nothing was committed. The writes
    before the commit point only touch the staging folder, so the previous release and `LATEST`
    are as they were; a rerun stages again from the start."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in FULL_DISK:
            raise
        with contextlib.suppress(OSError):
            if lake.fs.exists(staging):
                lake.fs.rm(staging, recursive=True)
        raise ReleaseError(
            f"release {version}: the lake's storage is full ({exc.strerror or exc}); nothing was "
            "committed, the previous release and `latest` are unchanged; free space and rerun"
        ) from exc


def _put(lake: Lake, staged: StagedRelease, rel: str, data: bytes, rows: int | None = None) -> None:
    atomic_write_bytes(lake.fs, f"{staged.path}/{rel}", data)
    staged.files[rel] = {
        "sha256": _sha256_bytes(data),
        "size": len(data),
        **({"rows": rows} if rows is not None else {}),
    }


ROW_GROUP_ROWS = 128  # release rows per Parquet row group: the writer's (and readers') memory bound
HASH_CHUNK = 1 << 20
# Publishing on an object store copies staged files in parts of this size (S3's multipart
# minimum is 5 MiB; s3fs buffers one part).
PUBLISH_CHUNK = 8 << 20


def write_rows(handle: Any, rows: list[dict[str, Any]], load_image: Callable[[str], bytes]) -> int:
    """Write release `rows` (in order, image bytes loaded by sha256 where `None`) to the binary
    file `handle` as Parquet, `ROW_GROUP_ROWS` rows per row group; returns the row count.

    Only one row group's images are in memory at a time, so a 70,000-image release is written
    in the memory of 128 rows. The same rows give the same bytes (fixed writer options)."""
    with pq.ParquetWriter(handle, RELEASE_SCHEMA, **PARQUET_OPTIONS) as writer:
        if not rows:
            writer.write_table(RELEASE_SCHEMA.empty_table())
        for start in range(0, len(rows), ROW_GROUP_ROWS):
            chunk = [materialize(row, load_image) for row in rows[start : start + ROW_GROUP_ROWS]]
            writer.write_table(
                pa.Table.from_pylist(chunk, schema=RELEASE_SCHEMA), row_group_size=ROW_GROUP_ROWS
            )
            del chunk
    return len(rows)


def file_digest(lake: Lake, path: str) -> tuple[str, int]:
    """(sha256, size) of a file on the lake, read in chunks (never whole into memory)."""
    digest, size = hashlib.sha256(), 0
    with lake.fs.open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class _HashingWriter:
    """A binary file wrapper that checksums the bytes as the writer hands them over.

    The manifest's checksum must be of what we produced, not of what the store gives back:
    hashing a read-back would bless a byte the store (or disk) altered after the write, and
    the verification before commit, which compares the stored file against this checksum,
    would then pass a corrupted release.
    """

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._digest.update(view)
        self.size += view.nbytes
        self._handle.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self._handle.flush()

    @property
    def closed(self) -> bool:
        return bool(self._handle.closed)

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def close(self) -> None:  # the owner of the real handle closes it
        pass

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def _put_rows(
    lake: Lake,
    staged: StagedRelease,
    rel: str,
    rows: list[dict[str, Any]],
    load_image: Callable[[str], bytes],
) -> None:
    """Stream `rows` into `<staging>/<rel>` (whole or not at all) and record the checksum of the
    bytes written (never of a read-back: see `_HashingWriter`)."""
    path = f"{staged.path}/{rel}"
    if lake.local:
        with atomic_local_file(path) as handle:
            sink = _HashingWriter(handle)
            count = write_rows(sink, rows, load_image)
    else:
        # An object-store upload appears on close, whole (multipart); the staging folder is
        # unpublished anyway until the manifest is written.
        with lake.fs.open(path, "wb") as handle:
            sink = _HashingWriter(handle)
            count = write_rows(sink, rows, load_image)
    staged.files[rel] = {"sha256": sink.hexdigest(), "size": sink.size, "rows": count}


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


def previous_published(lake: Lake, before: str) -> tuple[str, dt.datetime | None] | None:
    """The newest current (not withdrawn) published release before `before` in `version_key`
    order, with its window's end. A release held back by the content check or the gate does not
    use up its window: the next release covers it again. `before`'s corrections do not count."""
    base = version_key(version_base(before))
    for earlier in reversed(current_versions(lake)):
        if version_key(earlier) >= base:
            continue
        manifest = read_manifest(lake, earlier)
        if is_published(manifest):
            end = (manifest.get("window") or {}).get("end")
            if not isinstance(end, str):
                return earlier, None
            return earlier, parse_moment(end)
    return None


def default_release_window(
    lake: Lake, version: str, *, as_of: dt.datetime | None = None, cadence_days: int = DEFAULT_CADENCE_DAYS
) -> Window:
    """The window of a build without `--window`: the refresh's own rule (`freshness.default_window`)
    for the version's day (or `as_of`): from where the newest published release before it
    stopped, or `cadence_days` back when there is none, to the end of that day. Never the whole
    history: a build that re-released everything would mostly be held back as already published."""
    day = as_of or dt.datetime.combine(parse_version(version)[0], dt.time(), tzinfo=dt.UTC)
    found = previous_published(lake, version)
    return default_window(day, cadence_days, previous_end=found[1] if found else None)


def correct_release(lake: Lake, version: str, reason: str, **stage_args: Any) -> BuildResult:
    """A correction of the published `version`: the next `vYYYYMMDD.N`, rebuilt from the lake's
    current content over `version`'s own window (takedowns and fixed labels apply), naming
    `version` in `supersedes`; then `version` is withdrawn with `reason`, so readers, ranges and
    exports see the correction only. Run under the writer lock."""
    version = resolve_version(lake, version)
    manifest = read_manifest(lake, version)
    window = manifest.get("window") or {}

    def moment(value: Any) -> dt.datetime | None:
        return parse_moment(value) if isinstance(value, str) else None

    new = next_revision(version, committed_versions(lake))
    result = build_release(
        lake,
        version=new,
        window=Window(moment(window.get("start")), moment(window.get("end"))),
        supersedes=version,
        **stage_args,
    )
    withdraw_release(lake, version, f"superseded by {new}: {reason}")
    return result


def build_release(
    lake: Lake,
    *,
    extra_manifest: dict[str, Any] | None = None,
    publish_latest: bool = True,
    latest_reason: str = "",
    **stage_args: Any,
) -> BuildResult:
    """`stage_release` then `commit_release`, for callers with nothing to add in between."""
    staged = stage_release(lake, **stage_args)
    return commit_release(
        lake, staged, extra_manifest, publish_latest=publish_latest, latest_reason=latest_reason
    )


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


# ---------------------------------------------------------------------- verification
def _list_files(lake: Lake, base: str) -> list[str]:
    base = base.rstrip("/")
    if not lake.fs.exists(base):
        return []
    return sorted(
        p[len(base) + 1 :] for p in lake.fs.find(base) if not os.path.basename(p).startswith(".tmp-")
    )


def verify_path(lake: Lake, base: str) -> list[str]:
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


def row_hash_faults(lake: Lake, path: str, rel: str) -> list[str]:
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


def verify_release(lake: Lake, version: str) -> list[str]:
    version = resolve_version(lake, version) if version == "latest" else check_version(version)
    base = release_dir(lake, version)
    if not lake.fs.exists(base):
        return [f"release {version} does not exist in {lake.home}"]
    return verify_path(lake, base)
