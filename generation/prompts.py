"""Prompts for AIGen-Studio and AIGen-StreetLook, built from the taxonomy.

Templates, scene vocabularies, the negative prompt and their version are data
(`templates.json` next to this module); every generated image records the
template version and the exact prompt it was made from.

Sampling is stratified and seeded: categories are drawn round-robin over a seeded
permutation, and each attribute value, scene variable and framing is picked
"least used so far, ties broken by the seeded RNG". A caller may rely on:
- the same taxonomy, templates, count and seed give the same items, in the same order;
- over `k * len(categories)` studio items every category appears exactly `k` times;
- only values that apply to the category are requested (`Taxonomy.values_for`: no
  "below-the-knee t-shirt", no "fleece bag");
- within an attribute group, among the categories that share one set of applicable values,
  value counts differ by at most one, so every applicable value appears once the group has
  been used for those categories as often as the set has values.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from lookbench_live.schema.records import dumps
from lookbench_live.schema.taxonomy import (  # not_visible is never requested from a generator
    MULTI_SEPARATOR,
    NOT_VISIBLE,
)

TEMPLATES_PATH = Path(__file__).with_name("templates.json")

Subset = Literal["aigen_studio", "aigen_streetlook"]


class TaxonomyLike(Protocol):
    """The part of `lookbench_live.schema.taxonomy.Taxonomy` that prompts need."""

    @property
    def version(self) -> str: ...

    def category_names(self) -> Sequence[str]: ...

    def groups_for(self, category: str) -> Sequence[str]: ...

    def values(self, group: str) -> Sequence[str]: ...

    def values_for(self, category: str, group: str) -> Sequence[str]: ...


class PromptError(ValueError):
    """The taxonomy or the templates cannot produce the requested prompts."""


# --------------------------------------------------------------------------- items


@dataclass(frozen=True, slots=True)
class ItemSpec:
    """One garment to depict: its release item_ID, category and requested attribute values."""

    item_id: str
    category: str
    attributes: tuple[tuple[str, str], ...]  # (group, value), in taxonomy group order
    source: Literal["taxonomy", "product"] = "taxonomy"

    def requested(self) -> dict[str, Any]:
        """The entry of `Generation.requested_attributes_json` for this item."""
        return {"item_id": self.item_id, "category": self.category, "attributes": dict(self.attributes)}


@dataclass(frozen=True, slots=True)
class Outfit:
    """A street look: 2–4 items worn together, and the scene they are shown in."""

    items: tuple[ItemSpec, ...]
    scene: tuple[tuple[str, str], ...]  # (variable, phrase) in template order


def aigen_item_id(spec: dict[str, Any]) -> str:
    """`aigen:` + the first 16 hex digits of the sha256 of the canonical spec."""
    return "aigen:" + hashlib.sha256(dumps(spec).encode()).hexdigest()[:16]


def derive_seed(*parts: Any) -> int:
    """A 48-bit seed from canonical JSON of `parts` (stable across runs and machines)."""
    return int(hashlib.sha256(dumps(list(parts)).encode()).hexdigest()[:12], 16)


class BalancedChooser:
    """Least-used-first choice per key, ties broken by a seeded RNG (stratified sampling)."""

    def __init__(self, seed: int | str):
        self.rng = random.Random(str(seed))
        self.counts: dict[Hashable, Counter[str]] = defaultdict(Counter)

    def pick(self, key: Hashable, options: Sequence[str]) -> str:
        if not options:
            raise PromptError(f"nothing to choose for {key!r}")
        counts = self.counts[key]
        low = min(counts[o] for o in options)
        tied = [o for o in options if counts[o] == low]
        choice = tied[self.rng.randrange(len(tied))] if len(tied) > 1 else tied[0]
        counts[choice] += 1
        return choice

    def pick_many(self, key: Hashable, options: Sequence[str], k: int) -> list[str]:
        """`k` distinct options, least used first; returned in the order of `options`."""
        remaining = list(options)
        chosen: set[str] = set()
        for _ in range(min(k, len(remaining))):
            option = self.pick(key, remaining)
            remaining.remove(option)
            chosen.add(option)
        return [o for o in options if o in chosen]


def visible_values(taxonomy: TaxonomyLike, category: str, group: str) -> list[str]:
    """The values of `group` a generator may be asked to draw on a `category` (never not_visible)."""
    return [v for v in taxonomy.values_for(category, group) if v != NOT_VISIBLE]


class CategoryCycle:
    """Round-robin over a seeded permutation of categories, reshuffled every pass."""

    def __init__(self, categories: Sequence[str], seed: int | str):
        if not categories:
            raise PromptError("the taxonomy has no categories")
        self.categories = list(categories)
        self.rng = random.Random(f"categories:{seed}")
        self.queue: list[str] = []

    def next(self) -> str:
        if not self.queue:
            self.queue = list(self.categories)
            self.rng.shuffle(self.queue)
        return self.queue.pop(0)


def _pick_attributes(
    taxonomy: TaxonomyLike, category: str, chooser: BalancedChooser, per_item: int
) -> tuple[tuple[str, str], ...]:
    options = {g: visible_values(taxonomy, category, g) for g in taxonomy.groups_for(category)}
    groups = [g for g, values in options.items() if values]
    chosen_groups = chooser.pick_many(("groups", category), groups, per_item)
    # Balanced per (group, applicable set): categories sharing a vocabulary share the counts.
    return tuple((g, chooser.pick(("values", g, tuple(options[g])), options[g])) for g in chosen_groups)


def sample_studio_items(
    taxonomy: TaxonomyLike,
    count: int,
    *,
    seed: int,
    attributes_per_item: int,
    subset: Subset = "aigen_studio",
) -> list[ItemSpec]:
    """`count` garments covering categories and attribute values evenly (see module docstring)."""
    cycle = CategoryCycle(taxonomy.category_names(), seed)
    chooser = BalancedChooser(f"{subset}:{seed}")
    items: list[ItemSpec] = []
    for ordinal in range(count):
        category = cycle.next()
        attributes = _pick_attributes(taxonomy, category, chooser, attributes_per_item)
        spec = {
            "subset": subset,
            "seed": seed,
            "ordinal": ordinal,
            "category": category,
            "attributes": attributes,
        }
        items.append(ItemSpec(aigen_item_id(spec), category, attributes))
    return items


def product_item(product_key: str, category: str, attributes: dict[str, str]) -> ItemSpec:
    """An item described by a real product's annotated attributes; its item_ID is the product key."""
    pairs = tuple(sorted((g, v) for g, v in attributes.items() if v and v != NOT_VISIBLE))
    return ItemSpec(product_key, category, pairs, source="product")


# --------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class PromptTemplates:
    """The prompt data file, loaded; `version` is recorded with every image."""

    version: str
    negative_prompt: str
    item: str
    attribute_separator: str
    studio: dict[str, Any]
    street: dict[str, Any]
    slots: dict[str, list[str]]
    exclusive_slots: list[list[str]] = field(default_factory=list)

    # ------------------------------------------------------------- phrases
    def item_phrase(self, item: ItemSpec) -> str:
        values = [_words(v) for _, v in item.attributes]
        text = self.item.format(
            attributes=self.attribute_separator.join(values), category=_words(item.category)
        )
        return " ".join(text.split())

    def studio_prompt(self, item: ItemSpec, framing: str, variant: int, choices: dict[str, str]) -> str:
        """A studio or lifestyle prompt; `choices` holds presentation/backdrop/setting phrases."""
        templates = self.studio["framings"].get(framing)
        if not templates:
            raise PromptError(f"unknown studio framing {framing!r}; known: {sorted(self.studio['framings'])}")
        template = templates[variant % len(templates)]
        return template.format(item=self.item_phrase(item), **choices)

    def street_prompt(self, outfit: Outfit) -> str:
        phrases = [self.item_phrase(i) for i in outfit.items]
        joiner, last = self.street["item_joiner"], self.street["last_item_joiner"]
        items = _join_with_articles(phrases, joiner, last)
        return self.street["template"].format(items=items, **dict(outfit.scene))

    def scene_variables(self) -> list[str]:
        return [name for name in _fields(self.street["template"]) if name != "items"]

    def studio_choice_variables(self) -> list[str]:
        names: list[str] = []
        for templates in self.studio["framings"].values():
            for template in templates:
                names.extend(n for n in _fields(template) if n != "item" and n not in names)
        return names

    # ------------------------------------------------------------- slots
    def slot_of(self, category: str) -> str:
        words = set(re.split(r"[^a-z]+", category.lower()))
        for slot, keywords in self.slots.items():
            if words & set(keywords) or category.lower() in keywords:
                return slot
        return f"category:{category}"

    def compatible(self, slots: Iterable[str], candidate: str) -> bool:
        taken = set(slots)
        if candidate in taken:
            return False
        return not any(
            candidate in pair and (set(pair) - {candidate}) & taken for pair in self.exclusive_slots
        )

    def words(self) -> list[str]:
        """Every word the templates can emit (the tiny pipeline's tokenizer learns them)."""
        texts: list[str] = [self.negative_prompt, self.item, self.street["template"]]
        for templates in self.studio["framings"].values():
            texts.extend(templates)
        for key in self.studio_choice_variables():
            texts.extend(self.studio.get(key, []))
        for key in self.scene_variables():
            texts.extend(self.street.get(key, []))
        return sorted({w for t in texts for w in re.findall(r"[a-z]+", t.lower())})


def _fields(template: str) -> list[str]:
    return re.findall(r"{(\w+)}", template)


def _words(value: str) -> str:
    # A multi-valued answer ("red|white", a product's annotated colours) reads "red and white".
    return " ".join(" and ".join(value.split(MULTI_SEPARATOR)).replace("_", " ").split())


def _article(phrase: str) -> str:
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def _join_with_articles(phrases: list[str], joiner: str, last: str) -> str:
    with_articles = [_article(p) for p in phrases]
    if len(with_articles) == 1:
        return with_articles[0]
    return joiner.join(with_articles[:-1]) + last + with_articles[-1]


def load_templates(path: str | Path | None = None) -> PromptTemplates:
    """Load the prompt data file (the packaged `templates.json` by default)."""
    file = Path(path) if path is not None else TEMPLATES_PATH
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return PromptTemplates(**data)
    except (OSError, json.JSONDecodeError, TypeError) as exc:
        raise PromptError(f"prompt templates {file} are unreadable: {exc}") from exc


# --------------------------------------------------------------------------- outfits


def sample_outfits(
    taxonomy: TaxonomyLike,
    templates: PromptTemplates,
    count: int,
    *,
    seed: int,
    attributes_per_item: int,
    product_items: Sequence[ItemSpec] = (),
    product_share: float = 0.0,
    products_per_look: int = 1,
) -> list[Outfit]:
    """`count` outfits of 2–4 compatible items (one per body slot) in varied street scenes.

    Sizes cycle evenly over 2, 3, 4; categories are least-used first. When
    `product_items` are given, `round(count * product_share)` outfits include one real
    product (its item_ID is the product key, so the query has a real gallery match), and up
    to `products_per_look` products in all when more of them fit free body slots.
    """
    subset: Subset = "aigen_streetlook"
    categories = list(taxonomy.category_names())
    if len({templates.slot_of(c) for c in categories}) < 2:
        raise PromptError("street looks need at least two categories that can be worn together")
    chooser = BalancedChooser(f"{subset}:{seed}")
    rng = random.Random(f"outfits:{seed}")
    with_product = round(count * product_share) if product_items else 0
    product_slots = set(rng.sample(range(count), with_product)) if with_product else set()
    outfits: list[Outfit] = []
    for ordinal in range(count):
        size = int(chooser.pick("size", ["2", "3", "4"]))
        items: list[ItemSpec] = []
        slots: list[str] = []
        if ordinal in product_slots:
            keys = [p.item_id for p in product_items]
            chosen = chooser.pick("product", keys)
            product = next(p for p in product_items if p.item_id == chosen)
            items.append(product)
            slots.append(templates.slot_of(product.category))
            # More real garments where they fit (one per body slot, never twice the same product).
            while len(items) < min(size, products_per_look):
                fitting = [
                    p.item_id
                    for p in product_items
                    if p not in items and templates.compatible(slots, templates.slot_of(p.category))
                ]
                if not fitting:
                    break
                picked = chooser.pick("product", fitting)
                extra = next(p for p in product_items if p.item_id == picked)
                items.append(extra)
                slots.append(templates.slot_of(extra.category))
        while len(items) < size:
            candidates = [c for c in categories if templates.compatible(slots, templates.slot_of(c))]
            if not candidates:
                break
            category = chooser.pick("category", candidates)
            attributes = _pick_attributes(taxonomy, category, chooser, attributes_per_item)
            spec = {
                "subset": subset,
                "seed": seed,
                "outfit": ordinal,
                "position": len(items),
                "category": category,
                "attributes": attributes,
            }
            items.append(ItemSpec(aigen_item_id(spec), category, attributes))
            slots.append(templates.slot_of(category))
        scene = tuple(
            (name, chooser.pick(("scene", name), templates.street[name]))
            for name in templates.scene_variables()
        )
        outfits.append(Outfit(tuple(items), scene))
    return outfits
