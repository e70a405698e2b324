"""The read side of committed releases: versions, manifests, `LATEST`, withdrawals.

A release is `releases/vYYYYMMDD/` under the lake root and exists only if its `manifest.json`
exists (readers never trust a directory listing); `LATEST` names the published one users get
by default; `releases/withdrawn/<version>.json` takes a release out of `latest`, ranges and
exports. Beside the release format (`schema/release.py`) on the ground floor, so every stage
that reads earlier releases (dedup's never-republish rule, evaluation, the report) reads them
here, never through the release writer (`warehouse/release`, which the import contract keeps
away from the stages). It reads through any store with the lake's paths (`ReleaseStore`: a
`warehouse.lake.Lake` is one), so it imports nothing above the ground floor.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any, Protocol

from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.release import (
    LATEST,
    MANIFEST,
    WITHDRAWN,
    ReleaseKeyError,
    VersionError,
    check_file_key,
    parse_version,
    version_base,
    version_key,
)


class ReleaseStore(Protocol):
    """What the read side needs of a lake: its fsspec filesystem, root and path rule."""

    home: str
    fs: Any

    def path(self, *parts: str) -> str: ...

    @property
    def local(self) -> bool: ...


def gate_passed(manifest: dict[str, Any]) -> bool:
    """True when the release had no audit gate or its gate passed."""
    gate = manifest.get("gate")
    return not (isinstance(gate, dict) and gate.get("passed") is False)


def gate_status(manifest: dict[str, Any]) -> str:
    """ "passed", "failed" or "none" (no gate, or an undecided one) of a committed release."""
    gate = manifest.get("gate")
    if not isinstance(gate, dict) or gate.get("passed") is None:
        return "none"
    return "passed" if gate["passed"] else "failed"


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


class ReleaseWithdrawn(ReleaseError):
    """The release was withdrawn (`withdraw_release`): it is not served, exported or ranged."""

    def __init__(self, version: str, record: dict[str, Any]):
        self.version, self.record = version, record
        super().__init__(
            f"release {version} was withdrawn at {record.get('withdrawn_at')}: {record.get('reason')}"
        )


def version_for(day: dt.date) -> str:
    return f"v{day:%Y%m%d}"


def check_version(version: str) -> str:
    """`version` when it is `vYYYYMMDD` or a correction `vYYYYMMDD.N` (`schema.release.parse_version`)."""
    try:
        parse_version(version)
    except VersionError as exc:
        raise ReleaseError(str(exc)) from exc
    return version


def releases_root(lake: ReleaseStore) -> str:
    return lake.path("releases")


def _version_path(lake: ReleaseStore, version: str) -> str:
    """The version's own folder, where it is published and committed (writers use this)."""
    return lake.path("releases", check_version(version))


# In a manifest at the version's path: the release's files are read from this sibling folder
# instead (the verified copy of the old release while an object-store `--replace` runs).
LOCATION_KEY = "location"


def release_dir(lake: ReleaseStore, version: str) -> str:
    """Where a version's files are read: its own folder, or, while an object-store `--replace`
    of it is running (or was killed before its new manifest), the verified copy of the old
    release that its manifest points to (`location`). Local lakes replace by rename: never."""
    path = _version_path(lake, version)
    if lake.local:
        return path
    location = _location(lake, path, version)
    return lake.path("releases", location) if location else path


def _location(lake: ReleaseStore, path: str, version: str) -> str | None:
    try:
        manifest = json.loads(lake.fs.cat_file(f"{path}/{MANIFEST}"))
    except (FileNotFoundError, ValueError):
        return None
    location = manifest.get(LOCATION_KEY) if isinstance(manifest, dict) else None
    if isinstance(location, str) and location.startswith(f".previous-{version}-") and "/" not in location:
        return location
    return None


def committed_versions(lake: ReleaseStore) -> list[str]:
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


def _withdrawn_path(lake: ReleaseStore, version: str) -> str:
    return lake.path("releases", WITHDRAWN, f"{check_version(version)}.json")


def withdrawal(lake: ReleaseStore, version: str) -> dict[str, Any] | None:
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


def withdrawn_versions(lake: ReleaseStore) -> set[str]:
    """Committed versions that were withdrawn."""
    return {v for v in committed_versions(lake) if withdrawal(lake, v) is not None}


def release_order_key(name: str) -> tuple[int, tuple[dt.date, int] | str]:
    """`version_key` for a version name; a name that is none (an old evaluation row) sorts first."""
    try:
        return 1, version_key(name)
    except VersionError:
        return 0, name


def current_versions(lake: ReleaseStore) -> list[str]:
    """Committed versions that were not withdrawn, in `version_key` order: what `latest`,
    `--releases A..B`, the leaderboard and exports choose from."""
    return [v for v in committed_versions(lake) if withdrawal(lake, v) is None]


def newest_published(lake: ReleaseStore) -> str | None:
    """The newest current (not withdrawn) release whose gate passed, or None."""
    for version in reversed(current_versions(lake)):
        if is_published(read_manifest(lake, version)):
            return version
    return None


def resolve_version(lake: ReleaseStore, version: str) -> str:
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


def _listing(lake: ReleaseStore) -> list[str]:
    try:
        return [p.rstrip("/") for p in lake.fs.ls(releases_root(lake), detail=False)]
    except FileNotFoundError:
        return []


def read_latest(lake: ReleaseStore) -> str | None:
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


def read_manifest(lake: ReleaseStore, version: str) -> dict[str, Any]:
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


def check_earlier_releases(lake: ReleaseStore, version: str) -> None:
    """Every committed release before `version` has a readable manifest whose keys are files of
    the release format, and `LATEST` is sound: else `DamagedRelease` naming the first that is not.
    For the steps that must see all earlier releases (stage, commit): they fail closed."""
    read_latest(lake)
    for earlier in committed_versions(lake):
        if version_key(earlier) < version_key(version):
            manifest_files(lake, earlier, read_manifest(lake, earlier))


def manifest_files(lake: ReleaseStore, version: str, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
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


def previous_published(lake: ReleaseStore, before: str) -> tuple[str, dt.datetime | None] | None:
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
