"""Which rows a release holds: the assembly rules, as a pure function of lake tables.

Rules (what a benchmark user relies on):
- Only images with a `kept` dedup decision and an `ok` attribute annotation enter a release, and
  only under the owner the decision names as canonical (the same bytes under another product are
  a duplicate, not a second item); images already published in an earlier release never return.
- Every query has 1–4 gallery rows with its `item_ID`; a query without one is dropped and
  recorded (`no_gallery`).
- real_studio_flat: a query product (chosen by a seeded hash, share `query_share`) gives its
  first usable photo that is a studio or flat-lay shot (`warehouse/photo_type.py`) as the query
  and its other photos (up to 4) as the gallery; a photo that is not (a scene) is never the
  query (recorded, `not_studio_photo`) but stays in the gallery; a product with no such photo
  gives no query and stays eligible as noise.
- real_streetlook: one query row per annotated item crop of a look photo (`raw_image` is the
  photo, rows of one photo share it); the gallery is the linked product's photos that were
  first seen in this window and never published (a product first seen in an earlier month
  gives none, and its crop is held back with the reason). A crop within the dedup radius of
  an image an earlier release published is held back too (`near_earlier_release`).
- aigen_studio: a generated query; the gallery is the item's generated gallery images and, for
  image-conditioned queries, the photos of the product it was conditioned on.
- aigen_streetlook: one query per annotated crop of a generated street scene; the gallery is
  the item's generated studio images.
- noise: every other product with usable photos; a product shown by a look (its refs resolved
  from URLs or keys by the read model), conditioned on by a generation, or chosen as a query
  product is never a distractor.
- Across releases (docs/release.md): "published" counts only releases whose audit gate passed
  or that had none.
- `bbox` is `[x0, y0, x1, y1]` in pixels of `raw_image`, x1/y1 exclusive; null = whole image.
- A product photo annotated on the product's own item (a box, docs/annotation.md "Product
  photos") enters every subset as that crop: `image` is the crop, `raw_image` the photo, `bbox`
  the box. A product photo annotated whole is the whole image (`bbox` null).
- Freshness (`warehouse/freshness.py`, rules v1): a product, look or generation enters only
  with evidence that it is new in the window (a platform date in it, a first sighting after its
  site's baseline crawl, or made by this pipeline in it); each row carries that evidence
  (`freshness_evidence`, `evidence_at`); an item first seen in the window without it is held
  back (recorded, counted by reason in the manifest's `held_back`).
- Row order is stable (sorted by item_ID, then sha256), so the same lake gives the same files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from collections import defaultdict
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from PIL import Image

from lookbench_live.config import STUDIO_MIN_FLAT_BORDER
from lookbench_live.schema.hashing import HASH_METHOD, hash_bytes
from lookbench_live.schema.records import (
    BOX_NOT_LOCATED,
    NOT_STUDIO_PHOTO,
    Annotation,
    Generation,
    Product,
    product_key,
)
from lookbench_live.schema.release import NOISE, NOISE_CATEGORY, RELEASE_SCHEMA, SUBSET_DIFFICULTY, TASKS
from lookbench_live.warehouse.freshness import Decision, FreshnessRules, HeldBack
from lookbench_live.warehouse.photo_type import PhotoTypeRule
from lookbench_live.warehouse.released import ReleasedIndex
from lookbench_live.warehouse.views import LakeView, Window, choose_annotations

__all__ = [
    "Assembler", "Assembly", "LakeView", "Window", "choose_annotations", "materialize", "ordered_rows", "to_table",
]  # fmt: skip

CROP_QUALITY = 95  # fixed, so crops (and so the files) are byte-identical across rebuilds


@dataclass(slots=True)
class Assembly:
    rows: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    dropped: list[tuple[str, str, str]] = field(default_factory=list)  # (item, reason, detail)
    annotation_models: set[str] = field(default_factory=set)
    annotation_sources: set[str] = field(default_factory=set)
    generation_models: set[str] = field(default_factory=set)
    tiny_generation: bool = False
    # sha256 -> (pHash, mirror pHash, dHash) of published images, for the released-image index
    hashes: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    held_back: dict[str, int] = field(
        default_factory=dict
    )  # freshness reason -> items first seen in the window
    # The RealStudioFlat photo-type check: method, threshold, candidate photos scored, refused.
    photo_type: dict[str, Any] = field(default_factory=dict)


def _stable_share(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _ext(fmt: str | None) -> str:
    return {"JPEG": "jpg", "PNG": "png", "WEBP": "webp", "GIF": "gif"}.get((fmt or "").upper(), "bin")


def _crop(photo: bytes, bbox: tuple[int, int, int, int]) -> bytes:
    with Image.open(io.BytesIO(photo)) as img:
        img.load()
        region = img.convert("RGB").crop(bbox)
    out = io.BytesIO()
    region.save(out, format="JPEG", quality=CROP_QUALITY, optimize=False)
    return out.getvalue()


def _parse_bbox(text: str) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = (int(v) for v in text.split(","))
    return x0, y0, x1, y1


def _difficulty_crop(bbox: tuple[int, int, int, int], size: tuple[int, int]) -> str:
    share = (bbox[2] - bbox[0]) * (bbox[3] - bbox[1]) / max(1, size[0] * size[1])
    return "easy" if share >= 0.25 else "medium" if share >= 0.08 else "hard"


def _difficulty_gallery(n_gallery: int) -> str:
    return "easy" if n_gallery >= 3 else "medium" if n_gallery == 2 else "hard"


class Assembler:
    """Turns a `LakeView` into release rows; images are read through `load_image(sha256)`."""

    def __init__(
        self,
        view: LakeView,
        load_image: Callable[[str], bytes],
        *,
        window: Window,
        query_share: float,
        max_gallery: int,
        seed: int,
        taxonomy: Any,
        released: ReleasedIndex | None = None,
        radius: int = 0,
        takedown: Callable[[dict[str, Any]], str | None] | None = None,
        freshness: FreshnessRules | None = None,
        photo_type: PhotoTypeRule | None = None,
        failed_looks: frozenset[str] = frozenset(),
    ):
        self.photo_type = photo_type or PhotoTypeRule(STUDIO_MIN_FLAT_BORDER)
        # Generated images whose conditioned-look check failed (the label rules hold them back).
        self.failed_looks = failed_looks
        self._photo_scores: dict[str, float] = {}
        # Without rules (direct callers), the window on first_seen_at alone dates an item.
        self.freshness = freshness or FreshnessRules(window, {})
        self._dated = freshness is not None
        self._decisions: dict[str, Decision] = {}
        self.released = released
        self.takedown = takedown  # row -> why its owner asked to remove it, or None
        self._by_sha: dict[str, list[Annotation]] | None = None  # sha256 -> its chosen annotations
        self.radius = radius
        self.view = view
        self.load_image = load_image
        self.window = window
        self.query_share = query_share
        self.max_gallery = max_gallery
        self.seed = seed
        self.taxonomy = taxonomy
        self.out = Assembly()
        self.out.photo_type = {
            "method": self.photo_type.method, "threshold": self.photo_type.threshold, "scored": 0, "not_studio": 0,
        }  # fmt: skip

    # ------------------------------------------------------------------ helpers
    def is_kept(self, sha: str, kind: str, owner: str) -> bool:
        """Kept by dedup, published here under its canonical owner only, and never released before."""
        if sha not in self.view.kept or sha in self.view.released:
            return False
        canonical = self.view.kept[sha]
        return canonical is None or canonical == (kind, owner)

    def fresh(self, kind: str, key: str) -> Decision | None:
        """The freshness decision of a product, look or generation (once per item), or None when
        it is not new in this window. An item first seen in the window but held back by the
        rules is recorded and counted; one first seen outside it is the window's ordinary rule."""
        name = f"{kind}:{key}"
        decision = self._decisions.get(name)
        if decision is None:
            first_seen = self._first_seen(kind, key)
            if not self._dated:
                in_window = first_seen is not None and self.window.contains(first_seen)
                decision = Decision(None, None, None if in_window else HeldBack.FIRST_SEEN_OUTSIDE_WINDOW)
            elif kind == "product":
                decision = self.freshness.product(self.view.products[key])
            elif kind == "look":
                decision = self.freshness.look(self.view.looks[key])
            else:
                decision = self.freshness.generated(self.view.generations[key].first_seen_at)
            self._decisions[name] = decision
            if (
                self._dated
                and decision.held is not None
                and first_seen is not None
                and self.window.contains(first_seen)
            ):
                reason = decision.held.value
                self.out.held_back[reason] = self.out.held_back.get(reason, 0) + 1
                self.out.dropped.append((key, reason, f"{kind} not new in this window: {decision.detail}"))
        released = decision.fresh if self._dated else decision.held is None
        return decision if released else None

    def _first_seen(self, kind: str, key: str) -> dt.datetime | None:
        if kind == "product":
            product = self.view.products.get(key)
            return product.first_seen_at if product else None
        if kind == "look":
            return self.view.looks[key].first_seen_at
        return self.view.generations[key].first_seen_at

    @staticmethod
    def stamp(rows: list[dict[str, Any]], decision: Decision) -> list[dict[str, Any]]:
        """Each row carries the evidence that dates its item."""
        for row in rows:
            row["freshness_evidence"] = decision.evidence.value if decision.evidence else None
            row["evidence_at"] = decision.at if decision.evidence else None
        return rows

    def usable_images(
        self, kind: str, owner: str, *, in_window: bool = False
    ) -> list[tuple[dict[str, Any], Annotation]]:
        """Kept, annotated whole images of an owner, in page order, each sha once.

        `in_window`: only images first seen in the release's window (a gallery drawn from a
        product first seen in an earlier month gives only its photos first seen this month).
        """
        seen: set[str] = set()
        usable = []
        for img in self.view.owner_images.get((kind, owner), []):
            sha = img["sha256"]
            ann = (
                self.own_item_annotation(sha, owner)
                if kind == "product"
                else self.view.annotations.get((sha, ""))
            )
            if sha in seen or not self.is_kept(sha, kind, owner) or ann is None:
                continue
            if (
                in_window
                and img["first_seen_at"] is not None
                and not self.window.contains(img["first_seen_at"])
            ):
                continue
            seen.add(sha)
            usable.append((img, ann))
        return usable

    def own_item_annotation(self, sha: str, owner: str) -> Annotation | None:
        """A product photo's annotation: the whole image's, or the product's own box's (its
        `item_ref` is the product); a model's over the prior's, then the newest."""
        if self._by_sha is None:
            self._by_sha = defaultdict(list)
            for (ann_sha, _), ann in self.view.annotations.items():
                self._by_sha[ann_sha].append(ann)
        candidates = [a for a in self._by_sha.get(sha, []) if not a.bbox or a.item_ref == owner]
        if not candidates:
            return None
        return max(candidates, key=lambda a: (a.source == "vlm", a.created_at, a.bbox == ""))

    def _labels(self, ann: Annotation) -> dict[str, Any]:
        self.out.annotation_models.add(ann.model)
        self.out.annotation_sources.add(ann.source)
        main = ann.main_attribute or ""
        try:
            main, other = self.taxonomy.published_columns(ann.category, dict(ann.attributes), main)
        except Exception:
            visible = [v for v in ann.attributes.values() if v and v != "not_visible" and v != main]
            other = ", ".join(visible)
        return {
            "category": self._published_category(ann.category),
            "taxonomy_category": ann.category,  # ours (`sneakers`), what the judge and schema know
            "main_attribute": main,
            "other_attributes": other,
            "taxonomy_version": ann.taxonomy_version,
            "annotation_model": ann.model,
            "attributes": [{"key": k, "value": v} for k, v in sorted(ann.attributes.items())],
            "label_disputes": sorted(g for g, v in ann.prior_agreement.items() if v == "disagree"),
        }

    def _published_category(self, category: str | None) -> str | None:
        """The published benchmark's name (`sneakers` -> `shoe`); ours stays in `attributes`' source."""
        publish = getattr(self.taxonomy, "published_category", None)
        if publish is None:
            return category
        try:
            return str(publish(category))
        except (KeyError, ValueError):
            return category

    def _taken_down(self, rows: list[dict[str, Any]], subset: str) -> list[dict[str, Any]]:
        """`rows` without those on the takedown list; each removal is recorded with its reason."""
        if self.takedown is None:
            return rows
        # Rows hold no image bytes (the writer loads them); a pHash entry needs them, one row at a time.
        owner = getattr(self.takedown, "__self__", None)
        needs_bytes = bool(getattr(owner, "phashes", True))
        kept = []
        for row in rows:
            reason = self.takedown(materialize(row, self.load_image) if needs_bytes else row)
            if reason is None:
                kept.append(row)
            else:
                self.out.dropped.append((row["item_ID"], "takedown", f"{subset}: {row['sha256']}: {reason}"))
        return kept

    def _row(
        self,
        *,
        image: bytes | None,
        image_sha: str,
        image_ext: str,
        raw: bytes | None,
        raw_sha: str,
        raw_ext: str,
        bbox: tuple[int, int, int, int] | None,
        ann: Annotation,
        item: str,
        subset: str,
        difficulty: str,
        first_seen_at: dt.datetime,
        published_at: dt.datetime | None,
        source: str,
        source_url: str,
        provenance: dict[str, Any],
    ) -> dict[str, Any]:
        # `None` bytes are loaded by sha256 when the file is written (`materialize`): a release's
        # rows never hold every image at once.
        row = {
            "image": {"bytes": image, "path": f"{image_sha}.{image_ext}"},
            "raw_image": {"bytes": raw, "path": f"{raw_sha}.{raw_ext}"},
            "bbox": list(bbox) if bbox else None,
            "bbox_source": ann.bbox_source if bbox else None,  # what located the box (docs/release.md)
            "item_ID": item,
            "task": TASKS.get(subset, ""),
            "difficulty": SUBSET_DIFFICULTY.get(subset, ""),
            "difficulty_estimate": difficulty,
            "sha256": image_sha,
            "raw_sha256": raw_sha,
            "first_seen_at": first_seen_at,
            "published_at": published_at,
            "source": source,
            "source_url": source_url,
            "provenance": json.dumps(provenance, sort_keys=True, separators=(",", ":"), default=str),
        }
        row.update(self._labels(ann))
        return row

    def whole_image_row(
        self,
        img: dict[str, Any],
        ann: Annotation,
        *,
        item: str,
        subset: str,
        difficulty: str,
        provenance: dict,
    ) -> dict[str, Any]:
        if img.get("phash") and img.get("hash_method") == HASH_METHOD:
            self.out.hashes[img["sha256"]] = (img["phash"], img["phash_mirror"] or "", img.get("dhash") or "")
        # None: the lake's bytes, loaded by the writer (a release's rows never hold every image).
        image: bytes | None = None
        image_sha, image_ext = img["sha256"], _ext(img["format"])
        box = self._own_box(img, ann)
        if box is not None:
            # The product's own item: the crop is the row's image (a new image, so its hashes go
            # to the released-image index too); the photo stays as raw_image.
            image = _crop(self.load_image(img["sha256"]), box)
            image_sha, image_ext = hashlib.sha256(image).hexdigest(), "jpg"
            hashes = hash_bytes(image)
            self.out.hashes[image_sha] = (hashes.phash, hashes.phash_mirror, hashes.dhash or "")
        return self._row(
            image=image,
            image_sha=image_sha,
            image_ext=image_ext,
            raw=None,  # the photo: the lake's bytes, loaded by the writer
            raw_sha=img["sha256"],
            raw_ext=_ext(img["format"]),
            bbox=box,
            ann=ann,
            item=item,
            subset=subset,
            difficulty=difficulty,
            first_seen_at=img["first_seen_at"],
            published_at=img["published_at"],
            source=img["source"],
            source_url=img["source_url"],
            provenance=provenance,
        )

    def _own_box(self, img: dict[str, Any], ann: Annotation) -> tuple[int, int, int, int] | None:
        """The annotation's box when it is a usable box of this photo; None for the whole image."""
        if not ann.bbox:
            return None
        try:
            box = _parse_bbox(ann.bbox)
        except ValueError:
            box = (0, 0, 0, 0)
        w, h = img["width"] or 0, img["height"] or 0
        if not (0 <= box[0] < box[2] <= w and 0 <= box[1] < box[3] <= h):
            self.out.dropped.append(
                (img["sha256"], "bbox_outside_image", f"{ann.bbox} not inside {w}x{h}: whole image used")
            )
            return None
        return box

    def product_gallery(self, key: str, *, skip: AbstractSet[str] = frozenset()) -> list[dict[str, Any]]:
        decision = self.fresh("product", key) if key in self.view.products else None
        if decision is None:
            return []  # not new in this window: its photos are no gallery (why_no_gallery says)
        rows = []
        for img, ann in self.usable_images("product", key, in_window=True):
            if img["sha256"] in skip:
                continue
            rows.append((img, ann))
        product = self.view.products.get(key)
        prov = {"kind": "product", "product_url": product.url if product else None}
        return self.stamp(
            [
                self.whole_image_row(img, ann, item=key, subset="", difficulty="", provenance=prov)
                for img, ann in rows[: self.max_gallery]
            ],
            decision,
        )

    def emit(
        self, subset: str, query_rows: list[dict[str, Any]], gallery: list[dict[str, Any]], item: str
    ) -> None:
        query_rows = self._taken_down(query_rows, subset)
        gallery = self._taken_down(gallery, subset)
        if not query_rows:
            return
        if not gallery:
            self.out.dropped.append((item, "no_gallery", f"{subset}: {self.why_no_gallery(item)}"))
            return
        for row in gallery:
            row["task"] = TASKS[subset]
            row["difficulty"] = SUBSET_DIFFICULTY[subset]
            row["difficulty_estimate"] = _difficulty_gallery(len(gallery))
        self.out.rows[(subset, "query")].extend(query_rows)
        self.out.rows[(subset, "gallery")].extend(gallery)

    def why_no_gallery(self, item: str) -> str:
        """Why `item` has no gallery this month, for the recorded reason."""
        images = self.view.owner_images.get(("product", item), [])
        published = sorted({v for v in (self.released_version(i["sha256"]) for i in images) if v})
        if published:
            return f"the photos of {item} were published in {', '.join(published)}"
        in_window = [
            i for i in images if i["first_seen_at"] is None or self.window.contains(i["first_seen_at"])
        ]
        product = self.view.products.get(item)
        if not in_window and product is not None and not self.window.contains(product.first_seen_at):
            return f"{item} and its photos were first seen before this window (held back)"
        decision = self._decisions.get(f"product:{item}")
        if product is not None and decision is not None and decision.held is not None:
            return f"{item} is not new in this window ({decision.held.value}: {decision.detail})"
        return f"no usable gallery image for {item}"

    def released_version(self, sha: str) -> str | None:
        if self.released is not None:
            return self.released.sha_version.get(sha)
        return "an earlier release" if sha in self.view.released else None

    # ------------------------------------------------------------------ subsets
    def build(self) -> Assembly:
        reserved = self.reserved_products()
        query_products = self.real_studio_flat(reserved)
        self.real_streetlook()
        self.aigen()
        self.noise(reserved | query_products)
        return self.out

    def reserved_products(self) -> set[str]:
        # Product keys resolved from the looks' refs (the crawler states page URLs): see views.
        reserved: set[str] = set(self.view.linked_products())
        for gen in self.view.generations.values():
            if self._look_failed(gen):
                # Its only query is held back (`conditioned_look_mismatch`): the product is not
                # kept for it, so a fresh product is not lost to a look that failed to show it.
                continue
            # Products a generated query is conditioned on (every garment of a street look): their
            # photos are that query's gallery, so they are neither queries nor noise themselves.
            reserved.update(c["product_key"] for c in _conditioning(gen))
        return reserved

    def _look_failed(self, gen: Generation) -> bool:
        """An AIGen-Studio query every image of which failed its conditioned-look check. (A street
        look's garments are checked box by box, and stay reserved.)"""
        if not self.failed_looks or gen.role != "query" or gen.subset != "aigen_studio":
            return False
        shas = [img["sha256"] for img in self.view.owner_images.get(("generation", gen.generation_id), [])]
        return bool(shas) and all(sha in self.failed_looks for sha in shas)

    def real_studio_flat(self, reserved: set[str]) -> set[str]:
        chosen: set[str] = set()
        for key in sorted(self.view.products):
            product = self.view.products[key]
            decision = self.fresh("product", key)
            if decision is None:
                continue
            usable = self.usable_images("product", key)
            if len(usable) < 2 or key in reserved or _stable_share(self.seed, key) >= self.query_share:
                continue
            pick = self.studio_query(key, usable)
            if pick is None:
                continue  # no studio photo: no query; its photos stay eligible (noise)
            chosen.add(key)
            img, ann, score = pick
            prov = {
                "kind": "product",
                "product_url": product.url,
                "platform": product.platform,
                "photo_type": {"method": self.photo_type.method, "score": score, "threshold": self.photo_type.threshold},
            }  # fmt: skip
            gallery = self.product_gallery(key, skip={img["sha256"]})
            query = self.whole_image_row(
                img,
                ann,
                item=key,
                subset="real_studio_flat",
                difficulty=_difficulty_gallery(len(gallery)),
                provenance=prov,
            )
            self.emit("real_studio_flat", self.stamp([query], decision), gallery, key)
        return chosen

    def studio_query(
        self, key: str, usable: list[tuple[dict[str, Any], Annotation]]
    ) -> tuple[dict[str, Any], Annotation, float] | None:
        """The first of a product's photos that is a studio or flat-lay shot, with its score; each
        photo passed over is recorded (`not_studio_photo`) and stays a gallery photo."""
        for img, ann in usable:
            sha = img["sha256"]
            if sha not in self._photo_scores:
                # The stored photo (upright, as ingestion keeps it), not the product's crop: the
                # question is what kind of photo it is.
                self._photo_scores[sha] = self.photo_type.score(self.load_image(sha))
                self.out.photo_type["scored"] += 1
            score = self._photo_scores[sha]
            if self.photo_type.passes(score):
                return img, ann, score
            self.out.photo_type["not_studio"] += 1
            self.out.dropped.append(
                (
                    key,
                    NOT_STUDIO_PHOTO,
                    f"photo {sha}: flat border share {score} < {self.photo_type.threshold} "
                    f"({self.photo_type.method}): not a real_studio_flat query; it stays a gallery photo",
                )
            )
        return None

    def crops(
        self, sha: str, owner_kind: str, owner: str
    ) -> list[tuple[tuple[int, int, int, int], Annotation]]:
        found = []
        for (ann_sha, bbox), ann in self.view.annotations.items():
            if ann_sha == sha and bbox and ann.item_ref:
                if owner_kind == "generation" and ann.source == "metadata_prior" and ann.bbox_source is None:
                    # A prior box of a generated scene that names nothing that located it predates
                    # prior-v3: a horizontal band, a guess. Held back, never published. (A look's
                    # prior boxes were always its hotspots.)
                    self.out.dropped.append(
                        (f"{owner}:{bbox}", BOX_NOT_LOCATED, f"{bbox} of {sha} was not located (a band)")
                    )
                    continue
                found.append((_parse_bbox(bbox), ann))
        if not found:
            # A generated scene with no crop: nothing (layout or grounding) located its garments.
            reason = BOX_NOT_LOCATED if owner_kind == "generation" else "no_crops"
            self.out.dropped.append(
                (f"{owner_kind}:{owner}", reason, f"photo {sha} has no annotated item crop")
            )
        return sorted(found, key=lambda pair: (pair[1].item_ref or "", pair[0]))

    def crop_rows(
        self, img: dict[str, Any], subset: str, provenance: dict[str, Any], owner_kind: str, owner: str
    ) -> list[tuple[str, dict[str, Any]]]:
        photo = self.load_image(img["sha256"])
        if img.get("phash") and img.get("hash_method") == HASH_METHOD:
            self.out.hashes[img["sha256"]] = (img["phash"], img["phash_mirror"] or "", img.get("dhash") or "")
        rows = []
        for bbox, ann in self.crops(img["sha256"], owner_kind, owner):
            w, h = img["width"], img["height"]
            if not (0 <= bbox[0] < bbox[2] <= w and 0 <= bbox[1] < bbox[3] <= h):
                self.out.dropped.append(
                    (f"{owner}:{bbox}", "bbox_outside_image", f"{bbox} not inside {w}x{h}")
                )
                continue
            crop = _crop(photo, bbox)
            crop_sha = hashlib.sha256(crop).hexdigest()
            hashes = hash_bytes(crop)
            near = (
                self.released.near(hashes.phash, hashes.phash_mirror, self.radius) if self.released else None
            )
            if near is not None:
                # A crop is a new image: it must not be a near copy of anything published before.
                version, matched, distance = near
                self.out.dropped.append(
                    (
                        f"{owner}:{bbox}",
                        "near_earlier_release",
                        f"crop within {distance} bits of {matched} published in {version}",
                    )
                )
                continue
            self.out.hashes[crop_sha] = (hashes.phash, hashes.phash_mirror, hashes.dhash or "")
            row = self._row(
                image=crop,
                image_sha=crop_sha,
                image_ext="jpg",
                raw=None,  # the photo, loaded by the writer
                raw_sha=img["sha256"],
                raw_ext=_ext(img["format"]),
                bbox=bbox,
                ann=ann,
                item=ann.item_ref or "",
                subset=subset,
                difficulty=_difficulty_crop(bbox, (w, h)),
                first_seen_at=img["first_seen_at"],
                published_at=img["published_at"],
                source=img["source"],
                source_url=img["source_url"],
                provenance=provenance,
            )
            rows.append((ann.item_ref or "", row))
        return rows

    def real_streetlook(self) -> None:
        for key in sorted(self.view.looks):
            look = self.view.looks[key]
            decision = self.fresh("look", key)
            if decision is None:
                continue
            for img in self.view.owner_images.get(("look", key), []):
                if not self.is_kept(img["sha256"], "look", key):
                    continue
                prov = {"kind": "look", "look_url": look.url}
                for item, row in self.crop_rows(img, "real_streetlook", prov, "look", key):
                    self.emit(
                        "real_streetlook", self.stamp([row], decision), self.product_gallery(item), item
                    )

    def aigen(self) -> None:
        gallery_by_item: dict[tuple[str, str], list[tuple[dict[str, Any], Annotation, Generation]]] = (
            defaultdict(list)
        )
        queries: list[Generation] = []
        for gen_id in sorted(self.view.generations):
            gen = self.view.generations[gen_id]
            if gen.status != "ok" or self.fresh("generation", gen_id) is None:
                continue
            self.out.generation_models.add(gen.model)
            self.out.tiny_generation |= gen.model_is_tiny_local
            if gen.role == "query":
                queries.append(gen)
                continue
            for img, ann in self.usable_images("generation", gen_id):
                gallery_by_item[(gen.subset, gen.item_ids[0])].append((img, ann, gen))
        for gen in queries:
            prov = _generation_provenance(gen)
            if gen.subset == "aigen_studio":
                for img, ann in self.usable_images("generation", gen.generation_id):
                    item = gen.item_ids[0]
                    gallery = self._aigen_gallery(gen.subset, item, gallery_by_item)
                    query = self.whole_image_row(
                        img,
                        ann,
                        item=item,
                        subset="aigen_studio",
                        difficulty=_difficulty_gallery(len(gallery)),
                        provenance=prov,
                    )
                    self.emit(
                        "aigen_studio",
                        self.stamp([query], self._decisions[f"generation:{gen.generation_id}"]),
                        gallery,
                        item,
                    )
            else:
                for img in self.view.owner_images.get(("generation", gen.generation_id), []):
                    if not self.is_kept(img["sha256"], "generation", gen.generation_id):
                        continue
                    for item, row in self.crop_rows(
                        img, "aigen_streetlook", prov, "generation", gen.generation_id
                    ):
                        gallery = self._aigen_gallery(gen.subset, item, gallery_by_item)
                        made = self._decisions[f"generation:{gen.generation_id}"]
                        self.emit("aigen_streetlook", self.stamp([row], made), gallery, item)

    def _aigen_gallery(
        self,
        subset: str,
        item: str,
        gallery_by_item: dict[tuple[str, str], list[tuple[dict, Annotation, Generation]]],
    ) -> list[dict[str, Any]]:
        rows = [
            self.stamp(
                [
                    self.whole_image_row(
                        img,
                        ann,
                        item=item,
                        subset=subset,
                        difficulty="",
                        provenance=_generation_provenance(g),
                    )
                ],
                self._decisions[f"generation:{g.generation_id}"],
            )[0]
            for img, ann, g in gallery_by_item.get((subset, item), [])
        ]
        if item in self.view.products:
            rows.extend(self.product_gallery(item))
        return rows[: self.max_gallery]

    def noise(self, excluded: set[str]) -> None:
        for key in sorted(self.view.products):
            product = self.view.products[key]
            decision = self.fresh("product", key) if key not in excluded else None
            if decision is None:
                continue
            for img, ann in self.usable_images("product", key):
                row = self.whole_image_row(
                    img,
                    ann,
                    item=key,
                    subset=NOISE,
                    difficulty="",
                    provenance={"kind": "product", "product_url": product.url, "true_category": ann.category},
                )
                # The published noise gallery labels distractors "noise data": they never count as hits.
                row.update(category=NOISE_CATEGORY, main_attribute="", other_attributes="", task=TASKS[NOISE])
                self.out.rows[(NOISE, "gallery")].extend(self._taken_down(self.stamp([row], decision), NOISE))


def _generation_provenance(gen: Generation) -> dict[str, Any]:
    return {
        "kind": "generation",
        "generation_id": gen.generation_id,
        "model": gen.model,
        "model_is_tiny_local": gen.model_is_tiny_local,
        "pipeline_class": gen.pipeline_class,
        "prompt": gen.prompt,
        "negative_prompt": gen.negative_prompt,
        "template_version": gen.template_version,
        "seed": gen.seed,
        "steps": gen.steps,
        "guidance": gen.guidance,
        "size": [gen.width, gen.height],
        "scheduler": gen.scheduler,
        "conditioned_on": gen.conditioned_on,
        "strength": gen.strength,
        "conditioning": _conditioning(gen),
        "ip_adapter": gen.ip_adapter,
        "ip_adapter_scale": gen.ip_adapter_scale,
    }


def _conditioning(gen: Generation) -> list[dict[str, Any]]:
    return gen.conditioning()


def ordered_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in the file's stable order, each (item, image) once."""
    ordered = sorted(rows, key=lambda r: (r["item_ID"], r["raw_sha256"], r["bbox"] or [], r["sha256"]))
    unique = []
    seen: set[tuple[str, str]] = set()
    for row in ordered:
        key = (row["item_ID"], row["sha256"])
        if key not in seen:  # one image of one item once per file
            seen.add(key)
            unique.append(row)
    return unique


def materialize(row: dict[str, Any], load_image: Callable[[str], bytes]) -> dict[str, Any]:
    """A copy of `row` whose `image`/`raw_image` hold bytes: those left `None` by the assembler
    are loaded by `sha256` / `raw_sha256`."""
    out = dict(row)
    loaded: dict[str, bytes] = {}
    for column, sha_column in (("image", "sha256"), ("raw_image", "raw_sha256")):
        cell = row[column]
        if cell["bytes"] is None:
            sha = row[sha_column]
            if sha not in loaded:
                loaded[sha] = load_image(sha)
            out[column] = {**cell, "bytes": loaded[sha]}
    return out


def to_table(rows: list[dict[str, Any]], load_image: Callable[[str], bytes] | None = None) -> pa.Table:
    """Rows in a stable order as a table with exactly the release schema (every image in memory:
    small sets only; releases are written by `warehouse.release.write_rows`, in row groups)."""
    unique = ordered_rows(rows)
    if load_image is not None:
        unique = [materialize(row, load_image) for row in unique]
    return pa.Table.from_pylist(unique, schema=RELEASE_SCHEMA)


def product_view_key(product: Product) -> str:
    return product_key(product.source, product.product_id)
