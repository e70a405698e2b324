"""Prompts: stratified, seeded coverage of the taxonomy; outfits that can be worn together."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from generation_fixtures import small_settings, taxonomy

from lookbench_live.generation.plan import ConditioningProduct
from lookbench_live.generation.prompts import NOT_VISIBLE, load_templates, sample_outfits, sample_studio_items
from lookbench_live.generation.synthesis import plan_generation
from lookbench_live.generation.tiny import tiny_ip_adapter_name


def test_studio_items_cover_every_category_and_spread_values_evenly():
    tax = taxonomy()
    categories = tax.category_names()
    rounds = 3
    items = sample_studio_items(tax, rounds * len(categories), seed=7, attributes_per_item=3)

    per_category = Counter(item.category for item in items)
    assert set(per_category) == set(categories)
    assert set(per_category.values()) == {rounds}

    # Values are balanced per (group, set of values applicable to the category): categories
    # that share a vocabulary share the counts (the taxonomy's `applies` restricts values).
    per_set: dict[tuple[str, tuple[str, ...]], Counter[str]] = {}
    for item in items:
        assert len(item.attributes) == min(3, len(tax.groups_for(item.category)))
        for group, value in item.attributes:
            assert group in tax.groups_for(item.category)
            applicable = tuple(tax.values_for(item.category, group))
            assert value in applicable and value != NOT_VISIBLE
            per_set.setdefault((group, applicable), Counter())[value] += 1
    for (group, values), counts in per_set.items():
        used = sum(counts.values())
        full = [counts.get(v, 0) for v in values]
        # least-used-first: counts differ by at most one, so a set used as often as it
        # has values has shown every value.
        assert max(full) - min(full) <= 1, (group, counts)
        if used >= len(values):
            assert min(full) >= 1, group
    # every group of the taxonomy gets requested at some point
    assert {g for g, _ in per_set} == {g for c in categories for g in tax.groups_for(c)}


def test_an_aigen_plan_for_every_category_requests_only_applicable_values():
    """Issue 13 §4: no "double-breasted, white, fleece bag", no "below-the-knee, gray, sheer t-shirt"."""
    tax = taxonomy()
    templates = load_templates()
    categories = tax.category_names()
    settings = small_settings(
        studio_items=4 * len(categories), street_looks=24, gallery_per_item=1, attributes_per_item=4
    )
    _, requests = plan_generation(settings, tax, [])
    seen_categories: set[str] = set()
    for request in requests:
        for item in request.requested:
            seen_categories.add(item.category)
            for group, value in item.attributes:
                assert value in tax.values_for(item.category, group), (item.category, group, value)
            # The prompt names exactly these values: the rendered phrase is in the prompt.
            assert templates.item_phrase(item) in request.prompt, (
                templates.item_phrase(item),
                request.prompt,
            )
    assert seen_categories == set(categories)
    requested = {(i.category, v) for r in requests for i in r.requested for _, v in i.attributes}
    for category, value in [("bag", "fleece"), ("bag", "double-breasted"), ("t-shirt", "below-the-knee")]:
        assert (category, value) not in requested
        assert value not in [v for g in tax.groups_for(category) for v in tax.values_for(category, g)]


def test_sampling_is_seeded_and_item_ids_are_stable():
    tax = taxonomy()
    first = sample_studio_items(tax, 12, seed=1, attributes_per_item=3)
    again = sample_studio_items(tax, 12, seed=1, attributes_per_item=3)
    other = sample_studio_items(tax, 12, seed=2, attributes_per_item=3)
    assert first == again
    assert [i.item_id for i in first] != [i.item_id for i in other]
    assert len({i.item_id for i in first}) == 12
    assert all(i.item_id.startswith("aigen:") and len(i.item_id) == 6 + 16 for i in first)


def test_outfits_have_two_to_four_compatible_items_and_varied_scenes():
    tax = taxonomy()
    templates = load_templates()
    outfits = sample_outfits(tax, templates, 30, seed=3, attributes_per_item=2)
    sizes = Counter(len(o.items) for o in outfits)
    assert set(sizes) == {2, 3, 4} and max(sizes.values()) - min(sizes.values()) <= 1
    for outfit in outfits:
        slots = [templates.slot_of(i.category) for i in outfit.items]
        assert len(set(slots)) == len(slots), slots  # never two pairs of shoes
        assert not ({"full_body", "top"} <= set(slots) or {"full_body", "bottom"} <= set(slots))
    for variable in templates.scene_variables():
        seen = Counter(dict(o.scene)[variable] for o in outfits)
        options = templates.street[variable]
        assert set(seen) == set(options), variable  # 30 looks cover every scene option
    prompt = templates.street_prompt(outfits[0])
    for item in outfits[0].items:
        assert item.category.replace("_", " ") in prompt


def test_plan_records_template_version_and_links_products():
    tax = taxonomy()
    products = [
        ConditioningProduct(f"shop:{n}", f"{n:064x}", "dress", {"color": "red", "pattern": NOT_VISIBLE})
        for n in range(4)
    ]
    settings = small_settings(studio_items=3, street_looks=4, gallery_per_item=2, conditioned_share=0.5)
    choice, requests = plan_generation(settings, tax, products)
    templates = load_templates()
    assert choice.is_tiny_local and choice.name.startswith("tiny-sd-")
    assert all(r.template_version == templates.version for r in requests)
    assert all(r.negative_prompt == templates.negative_prompt for r in requests)
    assert len({r.generation_id for r in requests}) == len(requests)

    studio_queries = [r for r in requests if r.subset == "aigen_studio" and r.role == "query"]
    conditioned = [r for r in studio_queries if r.mode == "ip_adapter"]
    assert len(conditioned) == 2  # half of four products
    for request in conditioned:
        assert request.item_ids == (request.conditioned_on,)
        assert request.conditioned_on_sha256 == f"{int(request.conditioned_on.split(':')[1]):064x}"
        assert request.conditioning == ((request.conditioned_on, request.conditioned_on_sha256),)
        assert (
            request.adapter == tiny_ip_adapter_name() and request.adapter_scale == settings.ip_adapter_scale
        )
        assert request.strength is None
        assert "red" in request.prompt and NOT_VISIBLE not in request.prompt.replace(" ", "_")
    galleries = Counter(r.item_ids for r in requests if r.subset == "aigen_studio" and r.role == "gallery")
    assert len(galleries) == 3 and set(galleries.values()) == {2}

    street_queries = [r for r in requests if r.subset == "aigen_streetlook" and r.role == "query"]
    assert len(street_queries) == 4
    with_products = [r for r in street_queries if any(i.startswith("shop:") for i in r.item_ids)]
    assert len(with_products) == 2
    for request in with_products:  # conditioned on the photo of every real garment it shows
        shown = [i for i in request.item_ids if i.startswith("shop:")]
        assert request.mode == "ip_adapter"
        assert request.conditioning == tuple((key, f"{int(key.split(':')[1]):064x}") for key in shown)
    assert all(r.mode == "text2img" and not r.conditioning for r in street_queries if r not in with_products)
    street_gallery = Counter(
        r.item_ids[0] for r in requests if r.subset == "aigen_streetlook" and r.role == "gallery"
    )
    generated_items = {i for r in street_queries for i in r.item_ids if i.startswith("aigen:")}
    assert set(street_gallery) == generated_items  # products' galleries are their real photos
    assert set(street_gallery.values()) == {2}

    _, again = plan_generation(settings, tax, list(reversed(products)))
    assert [r.generation_id for r in again] == [r.generation_id for r in requests]


def test_a_multi_valued_product_attribute_reads_as_words():
    from lookbench_live.generation.prompts import product_item

    item = product_item("shop:1", "top", {"color": "red|white", "pattern": "stripe", "material": NOT_VISIBLE})
    assert load_templates().item_phrase(item) == "red and white, stripe top"


def test_street_looks_wear_several_products_and_carry_every_conditioning_photo():
    tax = taxonomy()
    categories = ["top", "pants", "sneakers", "dress", "coat", "bag"]
    products = [
        ConditioningProduct(f"shop:{n}", f"{n:064x}", category, {"color": "blue"})
        for n, category in enumerate(categories)
    ]
    settings = small_settings(
        studio_items=1, street_looks=6, conditioned_share=1.0, products_per_look=3, ip_adapter_scale=0.7
    )
    _, requests = plan_generation(settings, tax, products)
    sha_of = {p.product_key: p.sha256 for p in products}
    looks = [r for r in requests if r.subset == "aigen_streetlook" and r.role == "query"]
    assert len(looks) == 6
    assert max(len(r.conditioning) for r in looks) >= 2  # several real garments in one look
    templates = load_templates()
    for look in looks:
        shown = [i for i in look.item_ids if i in sha_of]
        assert shown, "every look wears a product at conditioned_share = 1"
        assert look.mode == "ip_adapter" and look.adapter_scale == 0.7
        assert look.conditioning == tuple((key, sha_of[key]) for key in shown)
        assert json.loads(look.conditioning_json) == [{"product_key": k, "sha256": sha_of[k]} for k in shown]
        slots = [templates.slot_of(i.category) for i in look.requested]
        assert len(set(slots)) == len(slots)  # products too: one garment per body slot
    # The photos are part of the identity: another photo of the same product is another request.
    moved = [ConditioningProduct(p.product_key, "f" * 64, p.category, p.attributes) for p in products]
    _, again = plan_generation(settings, tax, moved)
    assert not {r.generation_id for r in looks} & {r.generation_id for r in again}


def test_img2img_conditioning_keeps_studio_img2img_and_names_street_products_only():
    products = [ConditioningProduct(f"shop:{n}", f"{n:064x}", "dress", {"color": "red"}) for n in range(2)]
    settings = small_settings(street_looks=2, conditioned_share=1.0, conditioning="img2img")
    _, requests = plan_generation(settings, taxonomy(), products)
    studio = [r for r in requests if r.subset == "aigen_studio" and r.conditioned_on]
    assert len(studio) == 2 and all(r.mode == "img2img" and r.strength == settings.strength for r in studio)
    assert all(r.adapter is None and not r.conditioning for r in requests)


def test_a_configured_model_without_an_ip_adapter_is_refused_before_anything_runs():
    from lookbench_live.generation.runner import GenerationSetupError

    products = [ConditioningProduct("shop:1", "a" * 64, "dress", {})]
    settings = small_settings(model="some/model", conditioned_share=1.0)
    with pytest.raises(GenerationSetupError, match="ip_adapter"):
        plan_generation(settings, taxonomy(), products)
    plan_generation(settings, taxonomy(), [])  # nothing to condition: nothing to refuse
    named = small_settings(model="some/model", conditioned_share=1.0, ip_adapter="h94/IP-Adapter")
    _, requests = plan_generation(named, taxonomy(), products)
    assert {r.adapter for r in requests if r.mode == "ip_adapter"} == {
        "h94/IP-Adapter:models/ip-adapter_sd15.safetensors"
    }
