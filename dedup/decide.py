"""Decide, once per unique image, whether it is kept or dropped as a duplicate.

`run_dedup` reads the lake's `ok` images through the dedup index (dedup/history.py: the
history persisted, caught up with the fragments written since the last call) and writes one
`dedup_decisions` row per sha256 that has none yet. Nothing is deleted: a dropped image stays
in the lake with its reason, the image it matched and the distance; the release builder takes
only `kept` images, and each only under its `canonical_owner_*`.

The rule, applied to undecided images in canonical order (earliest `first_seen_at`, then
largest width x height, then sha256), first reason wins:

1. `opt_out`: the sha256, an owner, or an owner's source is listed in the opt-out settings.
2. `known_dataset`: within `radius` of an image in a configured known-dataset hash file.
3. `exact`: the same bytes are already in an earlier release (matched_ref = its version).
4. `near_earlier_release`: within `radius` of an image of an earlier release.
5. `near_in_run`: within `radius` of an image already kept, in this run (earlier in the
   canonical order) or in an earlier run of this lake (matched_ref = "run:<run_id>").
6. otherwise `kept`.

Distances are pHash Hamming distances, the smaller of (a, b) and (a, mirror(b)), so mirrored
copies match; among matches at the same distance the dHash distance, then canonical order,
picks the one recorded. Two images of the same owner (a product's several photos) must also
have 256-bit pHashes within `same_owner_fine_radius`: 64 bits cannot tell a product's front
from its back, and a product's distinct views must not knock each other out, while its
resized or re-encoded copies still do. Across owners the 64-bit radius alone decides: that is
the contamination case. Only hashes made with
`HASH_METHOD` are compared; rows hashed otherwise are rehashed from their stored bytes.

Decisions are final: a later image never displaces an image kept earlier, and a rerun adds
and changes nothing. One image's bytes used by several owners get one decision; the earliest
owner is canonical and the others are listed in `duplicate_owners`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lookbench_live.config import DedupSettings
from lookbench_live.dedup import history
from lookbench_live.dedup.history import IMAGE_COLUMNS, hashes_ok
from lookbench_live.dedup.history import Image as _Image
from lookbench_live.dedup.index import Pairs, is_hash, pack, range_pairs
from lookbench_live.dedup.known import KnownHashes, load_known_hashes
from lookbench_live.schema.hashing import HASH_METHOD, ImageHashes, fine_phash, hamming, hash_bytes
from lookbench_live.schema.records import DedupDecision, Rejection
from lookbench_live.warehouse.lake import Lake

log = logging.getLogger(__name__)

REASONS = ("exact", "near_in_run", "near_earlier_release", "known_dataset", "opt_out")

# (packed queries, packed targets, radius) -> every pair within radius, as `range_pairs` gives.
PairSearch = Callable[[Any, Any, int], Pairs]


@dataclass(slots=True)
class DedupResult:
    """What one call decided. `pending` = images without a decision when the call started."""

    run_id: str
    hash_method: str
    radius: int
    pending: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count
    written: int = 0  # decision rows appended (kept + dropped)
    unhashable: int = 0  # images left undecided (bytes missing or undecodable), each a `rejections` row
    references: int = 0  # earlier kept and released images compared against
    known_hashes: int = 0
    # What the call read of the dedup index (not in run summaries): kept images it holds as
    # columnar arrays, and those read in detail (found near a pending image).
    _index_rows: int = 0
    _detail_rows: int = 0


def _images_of(lake: Lake, shas: list[str]) -> dict[str, _Image]:
    """The `ok` images rows of these sha256 (a released image this lake dropped: rare), merged."""
    found: dict[str, _Image] = {}
    if not shas:
        return found
    where = (pc.field("status") == "ok") & pc.field("sha256").isin(pa.array(sorted(shas), pa.string()))
    for row in lake.read("images", columns=IMAGE_COLUMNS, where=where).to_pylist():
        found.setdefault(row["sha256"], _Image(sha256=row["sha256"])).merge(row)
    return found


def _rehash(lake: Lake, image: _Image) -> str | None:
    """Give `image` hashes of the current method from its stored bytes; returns an error or None."""
    if hashes_ok(image.hashes):
        return None
    try:
        if not lake.has_image(image.sha256):
            return "image bytes are not in the lake"
        image.hashes = hash_bytes(lake.get_image(image.sha256))
    except Exception as exc:  # any decoder failure is a recorded rejection, not a crashed run
        return f"{type(exc).__name__}: {exc}"
    return None


def _released(lake: Lake) -> tuple[dict[str, str], dict[str, ImageHashes]]:
    """sha256 -> version of every image a counted earlier release published, and their hashes.

    Read once per call from the released-image index (warehouse/released.py), not from every
    release file: a release whose audit gate failed does not count (its images stay eligible).
    """
    from lookbench_live.warehouse.released import counted_index

    index = counted_index(lake)
    hashes = {
        sha: ImageHashes(phash=p, phash_mirror=m, dhash=d or "", method=HASH_METHOD)
        for sha, (p, m, d) in index.hashes.items()
    }
    return dict(index.sha_version), hashes


@dataclass(slots=True)
class _Node:
    """A comparable image: a reference (earlier kept or released) or a pending one."""

    image: _Image
    release: str | None = None  # version, when the image is in an earlier release
    run_id: str | None = None  # the run that kept it, for earlier kept images


@dataclass(slots=True)
class _Match:
    distance: int
    dhash_distance: int
    rank: tuple[dt.datetime, int, str]
    node: int

    def order(self) -> tuple[int, int, tuple[dt.datetime, int, str]]:
        return (self.distance, self.dhash_distance, self.rank)


def _neighbours(
    queries: list[ImageHashes], targets: list[ImageHashes], radius: int, search: PairSearch = range_pairs
) -> dict[int, dict[int, int]]:
    """query -> {target: min pHash distance over (q, t) and (q, mirror(t))} within `radius`."""
    if not queries or not targets:
        return {}
    index = pack([t.phash for t in targets] + [t.phash_mirror for t in targets])
    pairs = search(pack([q.phash for q in queries]), index, radius)
    count = len(targets)
    found: dict[int, dict[int, int]] = {}
    for q, t, d in zip(
        pairs.query.tolist(), (pairs.target % count).tolist(), pairs.distance.tolist(), strict=True
    ):
        row = found.setdefault(q, {})
        if t not in row or d < row[t]:
            row[t] = d
    return found


def _dhash_distance(a: ImageHashes, b: ImageHashes) -> int:
    return hamming(a.dhash, b.dhash) if is_hash(a.dhash) and is_hash(b.dhash) else 64


def run_dedup(
    lake: Lake, settings: DedupSettings, run_id: str, *, search: PairSearch | None = None
) -> DedupResult:
    """Decide every `ok` image that has no `dedup_decisions` row yet; see the module doc for the rule.

    `search` replaces the pair search (`range_pairs`); it must return the same pairs, e.g. the
    flow's sharded search over its task runner (dedup/shards.py), so the decisions are the same.

    Idempotent: the decisions go to the lake in one append, keyed by sha256, so a killed call
    leaves none and a rerun writes the same ones; a call with nothing undecided writes nothing.
    Run it under the flow's writer lock. Raises `KnownDatasetError` for an unusable hash file.
    """
    result = DedupResult(run_id=run_id, hash_method=HASH_METHOD, radius=settings.radius)
    # The lake's history as the dedup index holds it (dedup/history.py): only the fragments
    # written since the last call are read, and the kept images stay in its columnar shards.
    state = history.caught_up(lake)
    pending = state.pending()
    result.pending = len(pending)
    if not pending:
        return result
    known = (
        load_known_hashes(settings.known_dataset_hashes) if settings.known_dataset_hashes else KnownHashes()
    )
    result.known_hashes = len(known)
    released, released_hashes = _released(lake)

    # References: what this run's images must not repeat. Kept images with usable hashes are
    # searched in the index's shards (below); the others are nodes here, as in a full scan:
    # released images the shards do not hold searchable, and kept images without usable hashes
    # (rehashed from their bytes each call).
    released_decided = state.decisions_of(list(released))
    searchable = state.hashed_among([s for s, (d, _) in released_decided.items() if d == "kept"])
    kept_unhashed = state.kept_unhashed()
    others = sorted(set(kept_unhashed) | {sha for sha in released if sha not in searchable})
    kept_run = {sha: run for sha, (d, run) in state.decisions_of(others).items() if d == "kept"}
    images: dict[str, _Image] = {sha: img for sha, (img, _) in state.details(sorted(kept_run)).items() if img}
    images.update({sha: state.images[sha] for sha in others if sha in state.images})
    dropped_released = [sha for sha in others if released_decided.get(sha, ("",))[0] == "dropped"]
    if dropped_released:
        images.update(_images_of(lake, dropped_released))
    references: list[_Node] = []
    missing_released: dict[str, _Image] = {}
    for sha in others:
        image = images.get(sha)
        if image is None:  # released, but not from this lake's images table
            missing_released[sha] = _Image(sha256=sha)
            continue
        if _rehash(lake, image) is not None:
            if sha not in released:
                log.warning("earlier kept image %s has no usable hashes; it is not compared against", sha)
                continue
            missing_released[sha] = image
            continue
        references.append(_Node(image, release=released.get(sha), run_id=kept_run.get(sha)))
    if missing_released:
        recovered = {sha: released_hashes[sha] for sha in missing_released if sha in released_hashes}
        for sha, image in missing_released.items():
            if sha in recovered:
                image.hashes = recovered[sha]
                references.append(_Node(image, release=released[sha], run_id=kept_run.get(sha)))
            else:
                log.warning("released image %s could not be hashed; only exact copies of it are caught", sha)

    # Pending images: each needs hashes of the current method, or it waits for a later run.
    rejections: list[Rejection] = []
    candidates: list[_Image] = []
    records: list[DedupDecision] = []
    for image in pending:
        error = _rehash(lake, image)
        if error is None:
            candidates.append(image)
        elif image.sha256 in released:  # the same bytes were published: no hash is needed to say so
            fields = {"reason": "exact", "matched_sha256": image.sha256, "distance": 0}
            records.append(_decision(image, run_id, {**fields, "matched_ref": released[image.sha256]}))
        else:
            rejections.append(
                Rejection(stage="dedup", item=image.sha256, reason="unhashable", detail=error, run_id=run_id)
            )
    result.unhashable = len(rejections)
    result.references = len(references) + state.searchable()

    result._index_rows = sum(len(shard) for shard in state.shards)
    find = search or range_pairs
    queries = np.array([int(img.hashes.phash, 16) for img in candidates], dtype=np.uint64)  # type: ignore[union-attr]
    # Kept images of earlier runs near a pending image: only these become nodes (all of them
    # when the embedding stage compares every kept image).
    found = state.search(queries, settings.radius, find=search)
    wanted = state.all_searchable() if settings.embedding_model else sorted({sha for _, sha, _ in found})
    held_here = len(references)
    for sha, (image, kept_by) in sorted(state.details(wanted).items()):
        if image is not None and image.hashes is not None:
            references.append(_Node(image, release=released.get(sha), run_id=kept_by))
    result._detail_rows = state.reads["detail_rows"]
    node_of = {references[i].image.sha256: i for i in range(held_here, len(references))}
    nodes = references + [_Node(img, release=released.get(img.sha256)) for img in candidates]
    first_pending = len(references)
    # This run's images and the references held here are searched as before.
    local = list(range(held_here)) + list(range(first_pending, len(nodes)))
    near = {
        q: {local[t]: d for t, d in row.items()}
        for q, row in _neighbours(
            [img.hashes for img in candidates],  # type: ignore[misc]
            [nodes[i].image.hashes for i in local],  # type: ignore[misc]
            settings.radius,
            find,
        ).items()
    }
    for q, sha, distance in found:
        if sha in node_of:
            near.setdefault(q, {})[node_of[sha]] = distance
    known_near = _neighbours(
        [img.hashes for img in candidates],  # type: ignore[misc]
        [ImageHashes(p, m, "", HASH_METHOD) for p, m in zip(known.phash, known.phash_mirror, strict=True)],
        settings.radius,
        find,
    )
    known_by_sha = {sha: i for i, sha in enumerate(known.sha256) if sha}

    fine_cache: dict[str, tuple[str, str] | None] = {}

    def fine(sha: str) -> tuple[str, str] | None:
        if sha not in fine_cache:
            try:
                fine_cache[sha] = fine_phash(lake.get_image(sha)) if lake.has_image(sha) else None
            except Exception:  # unreadable now: the pair is not confirmed, so both are kept
                fine_cache[sha] = None
        return fine_cache[sha]

    def same_owner_copy(a: _Image, b: _Image) -> bool:
        fa, fb = fine(a.sha256), fine(b.sha256)
        if fa is None or fb is None:
            return False
        return min(hamming(fa[0], fb[0]), hamming(fa[0], fb[1])) <= settings.same_owner_fine_radius

    opt_sha = set(settings.opt_out_sha256)
    opt_owner = set(settings.opt_out_owners)
    opt_source = set(settings.opt_out_sources)
    kept_nodes: set[int] = set(range(first_pending))
    first_record = len(records)
    for q, image in enumerate(candidates):
        node_id = first_pending + q
        own = image.hashes
        assert own is not None
        owners = image.owner_set()
        owner_ids = {o.split(":", 1)[1] for o in owners}
        fields: dict[str, Any] = {}
        if image.sha256 in opt_sha or owner_ids & opt_owner or image.sources & opt_source:
            fields = {"reason": "opt_out", "matched_ref": "settings.dedup.opt_out"}
        elif image.sha256 in known_by_sha or q in known_near:
            if image.sha256 in known_by_sha:
                k, distance = known_by_sha[image.sha256], 0
            else:
                k, distance = min(known_near[q].items(), key=lambda kv: (kv[1], kv[0]))
            fields = {
                "reason": "known_dataset",
                "matched_sha256": known.sha256[k] or None,
                "matched_ref": known.ref[k],
                "distance": distance,
            }
        elif image.sha256 in released:
            fields = {
                "reason": "exact",
                "matched_sha256": image.sha256,
                "matched_ref": released[image.sha256],
                "distance": 0,
            }
        else:
            matches: list[_Match] = []
            for other, distance in near.get(q, {}).items():
                if other == node_id or other not in kept_nodes:
                    continue
                if distance > settings.radius:
                    continue
                if owners & nodes[other].image.owner_set() and not same_owner_copy(image, nodes[other].image):
                    continue
                target = nodes[other].image
                matches.append(_Match(distance, _dhash_distance(own, target.hashes), target.rank(), other))  # type: ignore[arg-type]
            earlier_release = [m for m in matches if nodes[m.node].release is not None]
            best = min(earlier_release or matches, key=_Match.order, default=None)
            if best is not None:
                target_node = nodes[best.node]
                fields = {
                    "reason": "near_earlier_release" if target_node.release else "near_in_run",
                    "matched_sha256": target_node.image.sha256,
                    "matched_ref": target_node.release or f"run:{target_node.run_id or run_id}",
                    "distance": best.distance,
                    "dhash_distance": best.dhash_distance,
                }
        if not fields:
            kept_nodes.add(node_id)
        records.append(_decision(image, run_id, fields))

    if settings.embedding_model:
        from lookbench_live.dedup.embedding import embedding_stage

        records[first_record:] = embedding_stage(
            lake, settings, nodes, first_pending, kept_nodes, records[first_record:], run_id
        )

    for record in records:
        if record.decision == "kept":
            result.kept += 1
        else:
            reason = record.reason or "unknown"
            result.dropped[reason] = result.dropped.get(reason, 0) + 1
    # Rejections first: a kill between the two appends leaves images undecided, never lost.
    lake.append(rejections)
    result.written = lake.append(records)
    return result


def _decision(image: _Image, run_id: str, fields: dict[str, Any]) -> DedupDecision:
    canonical = image.canonical_owner()
    kind, _, owner_id = canonical.partition(":") if canonical else ("", "", "")
    duplicates = sorted(image.owner_set() - {canonical}) if canonical else []
    return DedupDecision(
        sha256=image.sha256,
        hash_method=HASH_METHOD,
        decision="dropped" if fields else "kept",
        run_id=run_id,
        canonical_owner_kind=kind or None,
        canonical_owner_id=owner_id or None,
        duplicate_owners=duplicates,
        **fields,
    )


def decisions_by_reason(records: Iterable[DedupDecision]) -> dict[str, int]:
    """Counts of decisions by reason (`kept` for kept images)."""
    counts: dict[str, int] = {}
    for record in records:
        key = record.reason if record.decision == "dropped" and record.reason else "kept"
        counts[key] = counts.get(key, 0) + 1
    return counts
