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

The package splits by concern: `stage` (assemble and write to a staging folder), `rows` (the row
writer and staging files), `commit` (manifest, verify, commit local or object store, reconcile,
withdraw), `build` (stage then commit, corrections). The read side (committed versions,
manifests, `latest`) and verification live with the release format in `schema/committed.py`
and `schema/verify.py`; they are re-exported here for the writer's callers.
"""

from __future__ import annotations

from lookbench_live.schema.committed import (
    LOCATION_KEY,
    DamagedRelease,
    ReleaseError,
    ReleaseStore,
    ReleaseWithdrawn,
    check_earlier_releases,
    check_version,
    committed_versions,
    current_versions,
    gate_passed,
    gate_status,
    is_published,
    manifest_files,
    newest_published,
    parse_manifest,
    previous_published,
    read_latest,
    read_manifest,
    release_dir,
    release_order_key,
    releases_root,
    resolve_version,
    version_for,
    withdrawal,
    withdrawn_versions,
)
from lookbench_live.schema.release import FILES, LATEST, MANIFEST, ROW_GROUP_ROWS
from lookbench_live.schema.verify import HASH_CHUNK, file_digest, row_hash_faults, verify_path, verify_release
from lookbench_live.warehouse.release.build import build_release, correct_release, default_release_window
from lookbench_live.warehouse.release.commit import (
    PUBLISH_CHUNK,
    BuildResult,
    ReleaseExists,
    ReleasePublished,
    commit_release,
    reconcile_releases,
    withdraw_release,
)
from lookbench_live.warehouse.release.rows import StagedRelease, write_rows
from lookbench_live.warehouse.release.stage import releases_before_rules, stage_options, stage_release
from lookbench_live.warehouse.released import counted_index, released_sha256s
from lookbench_live.warehouse.views import lake_view

__all__ = [
    "FILES", "HASH_CHUNK", "LATEST", "LOCATION_KEY", "MANIFEST", "PUBLISH_CHUNK", "ROW_GROUP_ROWS",
    "BuildResult", "DamagedRelease", "ReleaseError", "ReleaseExists", "ReleasePublished", "ReleaseStore",
    "ReleaseWithdrawn", "StagedRelease", "build_release", "check_earlier_releases", "check_version",
    "commit_release", "committed_versions", "correct_release", "counted_index", "current_versions",
    "default_release_window", "file_digest", "gate_passed", "gate_status", "is_published", "lake_view",
    "manifest_files", "newest_published", "parse_manifest", "previous_published", "read_latest",
    "read_manifest", "reconcile_releases", "release_dir", "release_order_key", "released_sha256s",
    "releases_before_rules", "releases_root", "resolve_version", "row_hash_faults", "stage_options", "stage_release",
    "verify_path", "verify_release", "version_for", "withdraw_release", "withdrawal", "withdrawn_versions",
    "write_rows",
]  # fmt: skip
