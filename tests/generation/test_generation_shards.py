"""Issue 14 §4: generation split into shards of whole batches (`run_generation(only_ids=...)`, one
task each on the flow's Dask workers) makes the same images, rows and batches as one call, and a
shard rerun after a kill makes only what its shard still misses."""

from __future__ import annotations

import io
from pathlib import Path

from generation_fixtures import small_settings, taxonomy, tiny_generator
from PIL import Image

from lookbench_live.flows.shards import deal_batches
from lookbench_live.generation import ConditioningProduct, run_generation
from lookbench_live.generation.synthesis import plan_generation
from lookbench_live.warehouse.lake import Lake

# 3 studio items and 2 looks in batches of 2 (a group's last batch is short), half of them
# conditioned on a product photo: text-to-image and image-to-image batches interleave.
SETTINGS = small_settings(studio_items=3, street_looks=2, batch_size=2, conditioned_share=0.5)
STABLE = ("generation_id", "status", "sha256", "batch_id", "batch_position", "seed", "prompt", "error")


def products(lake: Lake) -> list[ConditioningProduct]:
    out = []
    for i, (key, colour) in enumerate([("shop:red", (200, 20, 20)), ("shop:blue", (20, 20, 200))]):
        buffer = io.BytesIO()
        Image.new("RGB", (48, 64), colour).save(buffer, format="JPEG")
        out.append(ConditioningProduct(key, lake.put_image(buffer.getvalue()), ("dress", "coat")[i], {}))
    return out


def generated(lake: Lake) -> dict[str, tuple]:
    return {g.generation_id: tuple(getattr(g, f) for f in STABLE) for g in lake.records("generations")}


def test_shards_of_whole_batches_make_the_same_images_as_one_call(tmp_path: Path) -> None:
    one = Lake(tmp_path / "one")
    run_generation(one, SETTINGS, taxonomy(), "run", products=products(one), image_generator=tiny_generator())

    sharded = Lake(tmp_path / "sharded")
    conditioning = products(sharded)
    _, requests = plan_generation(SETTINGS, taxonomy(), conditioning)
    shards = deal_batches(requests, set(), SETTINGS.batch_size, 2)
    assert len(shards) == 2 and sorted(i for ids in shards for i in ids) == sorted(
        r.generation_id for r in requests
    )
    assert len({r.batch_key() for r in requests}) > 1  # both modes, so batches of several groups
    made = [
        run_generation(
            sharded,
            SETTINGS,
            taxonomy(),
            "run",
            products=conditioning,
            image_generator=tiny_generator(),
            only_ids=ids,
        )
        for ids in shards
    ]
    assert [m.planned for m in made] == [len(ids) for ids in shards]
    assert generated(sharded) == generated(one)  # same bits (sha256) and the same batches
    assert {i.sha256 for i in sharded.records("images")} == {i.sha256 for i in one.records("images")}


def test_a_shard_rerun_after_a_kill_makes_only_what_it_misses(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    conditioning = products(lake)
    _, requests = plan_generation(SETTINGS, taxonomy(), conditioning)
    first, second = deal_batches(requests, set(), SETTINGS.batch_size, 2)
    # Shard 0 finished before the kill; shard 1 committed its first batch only.
    run_generation(
        lake,
        SETTINGS,
        taxonomy(),
        "run",
        products=conditioning,
        image_generator=tiny_generator(),
        only_ids=first,
    )
    run_generation(
        lake,
        SETTINGS,
        taxonomy(),
        "run",
        products=conditioning,
        image_generator=tiny_generator(),
        only_ids=second[:2],
    )
    done = {key[0] for key in lake.keys("generations")}
    # The rerun plans from what the lake holds: only shard 1's missing batches are dealt again.
    again = deal_batches(requests, done, SETTINGS.batch_size, 2)
    assert sorted(i for ids in again for i in ids) == sorted(set(second) - set(second[:2]))
    for ids in again:
        result = run_generation(
            lake,
            SETTINGS,
            taxonomy(),
            "run",
            products=conditioning,
            image_generator=tiny_generator(),
            only_ids=ids,
        )
        assert result.skipped_existing == 0 and result.generated + result.failed == len(ids)
    rows = [g.generation_id for g in lake.records("generations")]
    assert sorted(rows) == sorted(r.generation_id for r in requests)  # each once, none twice
