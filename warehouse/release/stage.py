"""Staging a release: the lake's current content over a window, assembled (`warehouse/assemble.py`)
and written with its card and Croissant file to `releases/.staging-<version>-<id>/`, unpublished."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from lookbench_live.config import Settings
from lookbench_live.schema.committed import (
    ReleaseError,
    _version_path,
    check_earlier_releases,
    check_version,
    committed_versions,
    read_manifest,
    version_for,
)
from lookbench_live.schema.records import Rejection
from lookbench_live.schema.release import FILES, version_base
from lookbench_live.warehouse.assemble import Assembler, Window, ordered_rows
from lookbench_live.warehouse.card import croissant_json, dataset_card
from lookbench_live.warehouse.freshness import FRESHNESS_RULES_VERSION, FreshnessRules, site_baselines
from lookbench_live.warehouse.labels import LabelRules
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.photo_type import PhotoTypeRule
from lookbench_live.warehouse.release.commit import _check_rebuild, reconcile_releases
from lookbench_live.warehouse.release.rows import StagedRelease, _disk_full_is_reported, _put, _put_rows
from lookbench_live.warehouse.released import ReleasedIndex, counted_index
from lookbench_live.warehouse.takedown import takedown_filter
from lookbench_live.warehouse.views import LakeView, lake_view


def stage_options(settings: Settings) -> dict[str, Any]:
    """What the settings say about staging a release: the one place settings meet `stage_release`
    (the refresh and backfill, `release build`, `release correct`)."""
    return {
        "query_share": settings.release.query_share,
        "max_gallery": settings.release.max_gallery_per_item,
        "seed": settings.release.seed,
        "radius": settings.dedup.radius,
        "contact": settings.contact,
        "photo_type": PhotoTypeRule(settings.evidence.studio_min_flat_border),
    }


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
