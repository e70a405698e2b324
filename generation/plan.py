"""What to generate: the ordered list of requests for one run, and their identities.

A `GenerationRequest` holds every parameter that determines an image; its
`generation_id` is the sha256 of its canonical JSON (device excluded: a rerun on
another machine does not redo finished work). Planning is pure and cheap (no torch),
so a rerun computes the same ids and skips finished ones before loading any model.

A monthly release plans with its `cycle` (the release version): every seed derives from
`generation.seed` and the cycle, so each month brings new garments, prompts and seeds (new
ids), while a rerun of the same month plans the same ids and makes nothing. Conditioned
queries start from the products the flow offers, which are this window's arrivals.

Conditioned requests (`generation.conditioning = "ip_adapter"`, the default) are in mode
`ip_adapter` and carry `(product key, photo sha256)` for every real garment they show: a
conditioned AIGen-Studio query its one product, a street look each product it wears. The
photos, the adapter's id and its scale are part of the identity.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lookbench_live.config import GenerationSettings
from lookbench_live.generation.prompts import (
    BalancedChooser,
    ItemSpec,
    PromptTemplates,
    TaxonomyLike,
    derive_seed,
    product_item,
    sample_outfits,
    sample_studio_items,
)
from lookbench_live.schema.records import dumps

# text2img: the prompt alone; img2img: starts from a product photo (`strength`); ip_adapter:
# text-to-image steered by an IP-Adapter fed one product photo per conditioning garment.
Mode = Literal["text2img", "img2img", "ip_adapter"]


@dataclass(frozen=True)
class ConditioningProduct:
    """A real, annotated gallery product the flow offers for image-conditioned generation.

    `product_key` is "source:product_id" (the release item_ID); `sha256` names one of its
    photos in the lake; `attributes` maps attribute group -> value (annotation output).
    """

    product_key: str
    sha256: str
    category: str
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GenerationRequest:
    """One image to make; equal requests have equal `generation_id`s and equal images."""

    subset: Literal["aigen_studio", "aigen_streetlook"]
    role: Literal["query", "gallery"]
    item_ids: tuple[str, ...]
    mode: Mode
    prompt: str
    negative_prompt: str
    template_version: str
    seed: int
    steps: int
    guidance: float
    width: int
    height: int
    scheduler: str  # configured scheduler class name, or "default" (the pipeline's own)
    dtype: str
    model: str
    requested: tuple[ItemSpec, ...]
    conditioned_on: str | None = None
    conditioned_on_sha256: str | None = None
    strength: float | None = None
    # ip_adapter: (product key, photo sha256) per real garment, in prompt order; the adapter's
    # identity (see `synthesis.choose_adapter`) and scale.
    conditioning: tuple[tuple[str, str], ...] = ()
    adapter: str | None = None
    adapter_scale: float | None = None
    # A composed street scene (generation/compose.py): its garments, each made on its own and
    # pasted at a recorded position. Empty for every other request.
    garments: tuple[GenerationRequest, ...] = ()
    generation_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "generation_id", hashlib.sha256(dumps(self.canonical()).encode()).hexdigest()
        )

    @property
    def requested_attributes_json(self) -> str:
        return dumps([item.requested() for item in self.requested])

    @property
    def conditioning_json(self) -> str | None:
        """`Generation.conditioning_json`: [{"product_key", "sha256"}] in prompt order, or None."""
        if not self.conditioning:
            return None
        return dumps([{"product_key": key, "sha256": sha} for key, sha in self.conditioning])

    def canonical(self) -> dict[str, Any]:
        """Everything that determines the image (and its place in the release). The IP-Adapter
        keys are present only when set, so ids planned before they existed stay the same."""
        adapter: dict[str, Any] = {}
        if self.conditioning or self.adapter is not None or self.adapter_scale is not None:
            adapter = {
                "conditioning": [list(pair) for pair in self.conditioning],
                "adapter": self.adapter,
                "adapter_scale": self.adapter_scale,
            }
        # Present only for composed scenes, so every other request keeps its id.
        composed = {"garments": [g.canonical() for g in self.garments]} if self.garments else {}
        return {
            **adapter,
            **composed,
            "subset": self.subset,
            "role": self.role,
            "item_ids": list(self.item_ids),
            "mode": self.mode,
            "prompt": self.prompt,
            "negative_prompt": self.negative_prompt,
            "template_version": self.template_version,
            "seed": self.seed,
            "steps": self.steps,
            "guidance": self.guidance,
            "width": self.width,
            "height": self.height,
            "scheduler": self.scheduler,
            "dtype": self.dtype,
            "model": self.model,
            "requested": self.requested_attributes_json,
            "conditioned_on": self.conditioned_on,
            "conditioned_on_sha256": self.conditioned_on_sha256,
            "strength": self.strength,
        }

    def batch_key(self) -> tuple[Any, ...]:
        """Requests with equal keys can share one pipeline call."""
        return (
            self.mode,
            self.steps,
            self.guidance,
            self.width,
            self.height,
            self.strength,
            len(self.conditioning),  # one pipeline call feeds the adapter as many photos per prompt
            self.adapter,
            self.adapter_scale,
            bool(self.garments),  # a composed scene is made from its garments, not one pipeline call
        )


def cycle_seed(seed: int, cycle: str = "") -> int:
    """The planning seed of one release cycle: `seed` itself without a cycle (ids planned
    before cycles existed stay valid), else a 48-bit seed derived from both."""
    return seed if not cycle else derive_seed(seed, "cycle", cycle)


class RequestPlanner:
    """Turns settings, taxonomy and products into the run's ordered requests."""

    def __init__(
        self,
        settings: GenerationSettings,
        taxonomy: TaxonomyLike,
        templates: PromptTemplates,
        model_name: str,
        cycle: str = "",
        adapter_name: str | None = None,
        compose_street: bool = False,
    ):
        self.settings = settings
        self.taxonomy = taxonomy
        self.templates = templates
        self.model_name = model_name
        self.cycle = cycle
        self.adapter_name = adapter_name  # None: unresolved (`plan_generation` refuses ip requests)
        self.compose_street = compose_street  # no street-scene model: street queries are composed
        self.seed = cycle_seed(settings.seed, cycle)
        self.chooser = BalancedChooser(f"framing:{self.seed}")

    def _request(self, **values: Any) -> GenerationRequest:
        s = self.settings
        return GenerationRequest(
            negative_prompt=self.templates.negative_prompt,
            template_version=self.templates.version,
            steps=s.steps,
            guidance=s.guidance,
            width=s.width,
            height=s.height,
            scheduler=s.scheduler or "default",
            dtype=s.dtype,
            model=self.model_name,
            **values,
        )

    def studio_prompt(self, item: ItemSpec, framing_key: str, index: int) -> str:
        studio = self.templates.studio
        framings: list[str] = studio[framing_key]
        framing = (
            framings[index % len(framings)]
            if framing_key == "gallery_framings"
            else self.chooser.pick(framing_key, framings)
        )
        choices = {
            name: self.chooser.pick(("studio", name), studio[name])
            for name in self.templates.studio_choice_variables()
        }
        variant = int(
            self.chooser.pick(("variant", framing), [str(i) for i in range(len(studio["framings"][framing]))])
        )
        return self.templates.studio_prompt(item, framing, variant, choices)

    def gallery_for(
        self, subset: Literal["aigen_studio", "aigen_streetlook"], item: ItemSpec
    ) -> list[GenerationRequest]:
        return [
            self._request(
                subset=subset,
                role="gallery",
                item_ids=(item.item_id,),
                mode="text2img",
                prompt=self.studio_prompt(item, "gallery_framings", k),
                seed=derive_seed(self.seed, subset, item.item_id, "gallery", k),
                requested=(item,),
            )
            for k in range(self.settings.gallery_per_item)
        ]

    def studio(self, products: Sequence[ConditioningProduct]) -> list[GenerationRequest]:
        s = self.settings
        subset: Literal["aigen_studio"] = "aigen_studio"
        requests: list[GenerationRequest] = []
        items = sample_studio_items(
            self.taxonomy, s.studio_items, seed=self.seed, attributes_per_item=s.attributes_per_item
        )
        for item in items:
            requests.append(
                self._request(
                    subset=subset,
                    role="query",
                    item_ids=(item.item_id,),
                    mode="text2img",
                    prompt=self.studio_prompt(item, "query_framings", 0),
                    seed=derive_seed(self.seed, subset, item.item_id, "query", 0),
                    requested=(item,),
                )
            )
            requests.extend(self.gallery_for(subset, item))
        for product in self.conditioned_products(products):
            item = product_item(product.product_key, product.category, product.attributes)
            requests.append(
                self._request(
                    subset=subset,
                    role="query",
                    item_ids=(product.product_key,),
                    prompt=self.studio_prompt(item, "query_framings", 0),
                    seed=derive_seed(self.seed, subset, product.product_key, product.sha256, "conditioned"),
                    requested=(item,),
                    conditioned_on=product.product_key,
                    conditioned_on_sha256=product.sha256,
                    **self._conditioning([product], img2img=True),
                )
            )
        return requests

    def _conditioning(self, products: Sequence[ConditioningProduct], *, img2img: bool) -> dict[str, Any]:
        """The mode and conditioning fields of a request showing `products` (none: text2img)."""
        if not products:
            return {"mode": "text2img"}
        if self.settings.conditioning == "ip_adapter":
            return {
                "mode": "ip_adapter",
                "conditioning": tuple((p.product_key, p.sha256) for p in products),
                "adapter": self.adapter_name,
                "adapter_scale": self.settings.ip_adapter_scale,
            }
        if img2img:
            return {"mode": "img2img", "strength": self.settings.strength}
        return {"mode": "text2img"}  # img2img conditioning: street looks name their products only

    def conditioned_products(self, products: Sequence[ConditioningProduct]) -> list[ConditioningProduct]:
        """A seeded `conditioned_share` of the products (at most one request per product key)."""
        unique = {p.product_key: p for p in sorted(products, key=lambda p: (p.product_key, p.sha256))}
        ordered = list(unique.values())
        count = int(len(ordered) * self.settings.conditioned_share)
        chosen = random.Random(f"conditioned:{self.seed}").sample(ordered, count)
        return sorted(chosen, key=lambda p: p.product_key)

    def street(self, products: Sequence[ConditioningProduct]) -> list[GenerationRequest]:
        s = self.settings
        subset: Literal["aigen_streetlook"] = "aigen_streetlook"
        chosen = self.conditioned_products(products)
        product_items = [product_item(p.product_key, p.category, p.attributes) for p in chosen]
        outfits = sample_outfits(
            self.taxonomy,
            self.templates,
            s.street_looks,
            seed=self.seed,
            attributes_per_item=s.attributes_per_item,
            product_items=product_items,
            product_share=s.conditioned_share,
            products_per_look=s.products_per_look,
        )
        by_key = {p.product_key: p for p in chosen}
        requests: list[GenerationRequest] = []
        for ordinal, outfit in enumerate(outfits):
            ids = tuple(i.item_id for i in outfit.items)
            worn = [by_key[i.item_id] for i in outfit.items if i.source == "product"]
            seed = derive_seed(self.seed, subset, ordinal, list(ids), "query")
            garments = self.garments(outfit.items, by_key, seed) if self.compose_street else ()
            requests.append(
                self._request(
                    subset=subset,
                    role="query",
                    item_ids=ids,
                    prompt=self.templates.street_prompt(outfit),
                    seed=seed,
                    requested=outfit.items,
                    garments=garments,
                    **self._conditioning(worn, img2img=False),
                )
            )
            for item in outfit.items:
                if item.source == "taxonomy":  # a product's gallery is its real photos
                    requests.extend(self.gallery_for(subset, item))
        return requests

    def garments(
        self, items: Sequence[ItemSpec], by_key: dict[str, ConditioningProduct], seed: int
    ) -> tuple[GenerationRequest, ...]:
        """One garment request per item of a composed look: a product's garment drawn from its photo
        (IP-Adapter, as conditioned looks are), a taxonomy item's from its studio prompt."""
        return tuple(
            self._request(
                subset="aigen_streetlook",
                role="query",
                item_ids=(item.item_id,),
                prompt=self.studio_prompt(item, "gallery_framings", 0),
                seed=derive_seed(seed, "garment", index, item.item_id),
                requested=(item,),
                **self._conditioning(
                    [by_key[item.item_id]] if item.source == "product" else [], img2img=False
                ),
            )
            for index, item in enumerate(items)
        )

    def plan(self, products: Sequence[ConditioningProduct] = ()) -> list[GenerationRequest]:
        """All requests of the run, in a stable order, without duplicate generation_ids."""
        seen: set[str] = set()
        ordered: list[GenerationRequest] = []
        for request in [*self.studio(products), *self.street(products)]:
            if request.generation_id not in seen:
                seen.add(request.generation_id)
                ordered.append(request)
        return ordered
