"""Records for tests, with the fields a test does not care about filled in once.

Each factory takes the fields that matter to the test as keywords; the rest are the values the
test lakes have always used (a tiny local Stable Diffusion run, a shop on shop.example, a kept
image). Import the module (`import factories`), as the other helper modules are imported.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lookbench_live.schema.records import DedupDecision, Generation, ImageRecord, Product

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

# A generation as the tiny local pipeline makes it; the test names what it varies.
_GENERATION: dict[str, Any] = {
    "subset": "aigen_studio",
    "role": "query",
    "item_ids": [],
    "model": "tiny",
    "pipeline_class": "StableDiffusionPipeline",
    "prompt": "a photo",
    "negative_prompt": "",
    "template_version": "t1",
    "seed": 1,
    "steps": 2,
    "guidance": 1.0,
    "width": 256,
    "height": 256,
    "scheduler": "ddim",
    "device": "cpu",
    "dtype": "float32",
    "requested_attributes_json": "[]",
    "status": "ok",
    "first_seen_at": T0,
}


def generation(generation_id: str, **fields: Any) -> Generation:
    """A `Generation` row: `generation_id` and whatever the test varies (subset, role, sha256, …)."""
    return Generation(**{**_GENERATION, "generation_id": generation_id, **fields})


def product(product_id: str, **fields: Any) -> Product:
    """A product of the shop `shop` (Shopify) at https://shop.example/p/<id>."""
    base: dict[str, Any] = {
        "source": "shop",
        "platform": "shopify",
        "url": f"https://shop.example/p/{product_id}",
        "first_seen_at": T0,
        "content_hash": f"h{product_id}",
    }
    return Product(**{**base, "product_id": product_id, **fields})


def kept(image: ImageRecord | str, hash_method: str = "m", run_id: str = "t") -> DedupDecision:
    """The dedup decision that keeps `image` (a record, or a sha256 with its `hash_method`)."""
    if isinstance(image, ImageRecord):
        return DedupDecision(
            sha256=image.sha256, hash_method=image.hash_method, decision="kept", run_id=run_id
        )
    return DedupDecision(sha256=image, hash_method=hash_method, decision="kept", run_id=run_id)
