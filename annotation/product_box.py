"""Which part of a product photo is the product: the detected item that matches its category.

A product photo often shows a model wearing the product with other garments, or a styled
set. Grounding lists the items in it; the product is the item of the product's category:

1. items of exactly that category;
2. else items published under the same name (`sneakers` and `boots` are both `shoe`);
3. else items of the same body region and super-category (`blouse` detected as `shirt`),
   only when they are all one category (two candidates is a guess, not a match).

The box is the union of the matched items (a pair of shoes is one product). A box covering
at least `FILLS_IMAGE` of the photo is the whole image (a flat shot needs no crop). Without
a match the whole image is used and the reason is recorded (`ProductBox.reason`):
`product_item_none` (nothing detected), `product_item_not_found` (no item of the product's
category), `product_item_ambiguous` (rule 2 or 3 found several categories),
`product_item_implausible` (the matched box is under 1 % of the photo or thinner than 1:20).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lookbench_live.annotation.annotator import GroundedItem
from lookbench_live.schema.taxonomy import Taxonomy

Box = tuple[int, int, int, int]
FILLS_IMAGE = 0.9  # share of the photo above which the product's box is the whole image
# A product is not a speck: a matched box under this share of the photo (or thinner than
# MAX_ASPECT to 1) is a detection error, and the whole image is safer than its crop.
MIN_SHARE = 0.01
MAX_ASPECT = 20


@dataclass(frozen=True, slots=True)
class ProductBox:
    """The product's box (None: the whole image), its category, and why there is no box."""

    box: Box | None
    category: str | None
    reason: str | None = None
    detail: str = ""


def _area(box: Box) -> int:
    return max(0, box[2] - box[0]) * max(0, box[3] - box[1])


def _union(boxes: Sequence[Box]) -> Box:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _tiers(taxonomy: Taxonomy, category: str, detected: str) -> int | None:
    """0: same category, 1: same published name, 2: same region and super-category, None: other."""
    if detected == category:
        return 0
    if detected not in taxonomy.categories or category not in taxonomy.categories:
        return None
    if taxonomy.published_category(detected) == taxonomy.published_category(category):
        return 1
    ours, theirs = taxonomy.categories[category], taxonomy.categories[detected]
    same_place = ours.body_region and ours.body_region == theirs.body_region
    if same_place and ours.super_category == theirs.super_category:
        return 2
    return None


def pick_product_box(
    taxonomy: Taxonomy, category: str | None, items: Sequence[GroundedItem], size: tuple[int, int]
) -> ProductBox:
    """The product's box among `items` (pixels of the original `size` = (width, height) photo).

    `category` None (the source names none): the largest item is the product and gives the category.
    """
    whole = max(1, size[0] * size[1])

    def fitted(box: Box, chosen: str) -> ProductBox:
        width, height = box[2] - box[0], box[3] - box[1]
        if _area(box) < MIN_SHARE * whole or max(width, height) > MAX_ASPECT * max(1, min(width, height)):
            return ProductBox(None, chosen, "product_item_implausible", f"{chosen} box {list(box)} in {size}")
        return ProductBox(None if _area(box) >= FILLS_IMAGE * whole else box, chosen)

    if not items:
        return ProductBox(None, category, "product_item_none", "grounding found no item in the photo")
    if category is None:
        largest = max(items, key=lambda i: _area(i.bbox))
        return fitted(largest.bbox, largest.category)
    by_tier: dict[int, list[GroundedItem]] = {}
    for item in items:
        tier = _tiers(taxonomy, category, item.category)
        if tier is not None:
            by_tier.setdefault(tier, []).append(item)
    seen = ", ".join(sorted({i.category for i in items}))
    if not by_tier:
        return ProductBox(
            None, category, "product_item_not_found", f"product is {category!r}; detected: {seen}"
        )
    matched = by_tier[min(by_tier)]
    kinds = {i.category for i in matched}
    if len(kinds) > 1:
        return ProductBox(
            None,
            category,
            "product_item_ambiguous",
            f"product is {category!r}; as close: {', '.join(sorted(kinds))}",
        )
    return fitted(_union([i.bbox for i in matched]), category)
