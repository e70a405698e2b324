"""The metadata prior: what a source already says, mapped onto the taxonomy.

A free second opinion on every item, and the annotation itself when no VLM is configured.
It reads only our own records (no model, no network) and uses the taxonomy's vocabulary
and synonym matching (`normalize_category`, `find_values`, `normalize_value`).

Where the facts come from, in order of trust (the first source that names a group wins):
- products: the `color` and `material` fields, then the title, the tags, the category
  path, and last the description (descriptions mention other garments: "pairs well with
  black trousers"); the category from the category path (most specific first), then the
  title, then the tags;
- generations: the attributes the generator was asked for, per item;
- looks: the stated hotspot boxes and their linked products (see `run.py`);
- composed street scenes: the layout the generator placed each garment at (`Generation.layout_json`).

`main_attribute` in prior mode: the first visible value in `MAIN_PRIORITY` order of groups
(material, pattern, embellishment, texture/finish, neckline, …), else the first visible
value in the taxonomy's group order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lookbench_live.schema.records import Generation, Product
from lookbench_live.schema.taxonomy import NOT_VISIBLE, Taxonomy, values_match

PRIOR_MODEL = "metadata-prior"
# The prompt_version of prior annotations: bump when the mapping rules change.
# prior-v3: street scenes are boxed by their composed layout only (no horizontal bands).
PRIOR_VERSION = "prior-v3"
# The groups that best tell one item of a category from another, most telling first: what a
# shopper names first ("the leather one", "the striped one"); colour comes last because it
# is the least stable across photos.
MAIN_PRIORITY = (
    "material",
    "pattern",
    "embellishment",
    "texture_finish",
    "neckline",
    "collar",
    "sleeve_style",
    "heel_type",
    "toe_shape",
    "frame_shape",
    "leg_shape",
    "silhouette",
    "garment_length",
    "sleeve_length",
    "shaft_height",
    "strap",
    "closure",
    "waistline",
    "rise",
    "style_occasion",
    "color",
)
_WORDS = re.compile(r"[\w'-]+")


@dataclass(slots=True)
class Prior:
    """The taxonomy's reading of a source's own words: category (or None) and values by group."""

    category: str | None
    attributes: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)  # group -> which field said so

    def main_attribute(self, taxonomy: Taxonomy) -> str | None:
        return choose_main_attribute(taxonomy, self.category, self.attributes)


def choose_main_attribute(
    taxonomy: Taxonomy, category: str | None, attributes: Mapping[str, str]
) -> str | None:
    """The documented priority rule: the first visible value of MAIN_PRIORITY, else of the category's groups."""
    groups = list(taxonomy.groups_for(category)) if category else list(attributes)
    ordered = [g for g in MAIN_PRIORITY if g in attributes] + [g for g in groups if g not in MAIN_PRIORITY]
    for group in ordered:
        value = attributes.get(group)
        if value and value != NOT_VISIBLE:
            return value
    return None


def _category_of(taxonomy: Taxonomy, texts: Iterable[str | None]) -> str | None:
    """The first text that names a category: whole, else its rightmost, longest phrase.

    English puts the head noun last ("black silk midi slip dress"), so scanning from the
    right finds the garment rather than a modifier ("dress shirt" is a shirt).
    """
    for text in texts:
        if not text:
            continue
        found = taxonomy.normalize_category(text)
        if found:
            return found
        words = _WORDS.findall(text)
        for start in range(len(words) - 1, -1, -1):
            for length in range(min(3, len(words) - start), 0, -1):
                found = taxonomy.normalize_category(" ".join(words[start : start + length]))
                if found:
                    return found
    return None


def _collect(taxonomy: Taxonomy, category: str, sources: Iterable[tuple[str, str | None]]) -> Prior:
    prior = Prior(category=category)
    allowed = set(taxonomy.groups_for(category))
    for label, text in sources:
        if not text:
            continue
        for group, value in taxonomy.find_values(category, text).items():
            if group in allowed and group not in prior.attributes and value != NOT_VISIBLE:
                prior.attributes[group] = value
                prior.evidence[group] = label
    return prior


def product_prior(taxonomy: Taxonomy, product: Product) -> Prior:
    """The prior of a product from its title, description, colour, material, tags and category path."""
    path = list(reversed(product.category_path))
    category = _category_of(taxonomy, [*path, product.title, *product.tags])
    if category is None:
        return Prior(category=None)
    return _collect(
        taxonomy,
        category,
        [
            ("color", product.color),
            ("material", product.material),
            ("title", product.title),
            ("tags", ", ".join(product.tags)),
            ("category_path", " / ".join(product.category_path)),
            ("description", product.description),
        ],
    )


@dataclass(slots=True)
class RequestedItem:
    item_id: str
    prior: Prior


def generation_priors(taxonomy: Taxonomy, generation: Generation) -> list[RequestedItem]:
    """One prior per requested item, in prompt order, from `requested_attributes_json`.

    Values are normalized through the taxonomy; a value it does not know is left out
    (and so counts as `prior_missing`), never guessed.
    """
    try:
        requested: Any = json.loads(generation.requested_attributes_json or "[]")
    except json.JSONDecodeError:
        requested = []
    items: list[RequestedItem] = []
    for entry in requested if isinstance(requested, list) else []:
        if not isinstance(entry, dict):
            continue
        category = _category_of(taxonomy, [str(entry.get("category") or "")])
        prior = Prior(category=category)
        attributes = entry.get("attributes") or {}
        if category and isinstance(attributes, dict):
            allowed = set(taxonomy.groups_for(category))
            for group, text in attributes.items():
                if group not in allowed or not isinstance(text, str):
                    continue
                value = taxonomy.normalize_value(group, text)
                if value:
                    prior.attributes[group] = value
                    prior.evidence[group] = "requested"
        items.append(RequestedItem(item_id=str(entry.get("item_id") or ""), prior=prior))
    return items


def agreement(
    taxonomy: Taxonomy, category: str | None, attributes: Mapping[str, str], prior: Prior | None
) -> dict[str, str]:
    """Per group (and "category"): agree | disagree | prior_missing, for a VLM answer against the prior."""
    result: dict[str, str] = {}
    if prior is None or prior.category is None:
        result["category"] = "prior_missing"
    else:
        result["category"] = "agree" if prior.category == category else "disagree"
    groups = list(taxonomy.groups_for(category)) if category else list(attributes)
    for group in groups:
        stated = prior.attributes.get(group) if prior is not None and prior.category == category else None
        if stated is None:
            result[group] = "prior_missing"
        else:
            # A multi-valued answer ("red|white") agrees with a prior it contains ("red").
            answer = attributes.get(group, NOT_VISIBLE)
            result[group] = "agree" if answer == stated or values_match(answer, stated) else "disagree"
    return result
