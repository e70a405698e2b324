"""run_generation: rows in the lake, linking to products, failures recorded, resume after a kill."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import factories
import pytest
from generation_fixtures import small_settings, taxonomy, tiny_dir, tiny_generator
from PIL import Image

from lookbench_live.generation import ConditioningProduct, run_generation
from lookbench_live.generation.synthesis import plan_generation
from lookbench_live.generation.tiny import tiny_ip_adapter_name
from lookbench_live.schema.records import Generation, ImageRecord
from lookbench_live.warehouse.lake import Lake


def product_photo(lake: Lake, color: tuple[int, int, int]) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (48, 64), color).save(buffer, format="JPEG")
    return lake.put_image(buffer.getvalue())


def rows(lake: Lake, table: str) -> list:
    return list(lake.records(table))


def test_generates_linked_rows_and_images(tmp_path):
    lake = Lake(tmp_path / "lake")
    settings = small_settings(studio_items=2, street_looks=1, gallery_per_item=1)
    result = run_generation(lake, settings, taxonomy(), "run-1", image_generator=tiny_generator())
    _, planned = plan_generation(settings, taxonomy())

    assert result.planned == len(planned) == result.generated and result.failed == 0
    generations = {g.generation_id: g for g in rows(lake, "generations")}
    images = {i.owner_id: i for i in rows(lake, "images")}
    assert set(generations) == set(images) == {r.generation_id for r in planned}
    for request in planned:
        g: Generation = generations[request.generation_id]
        image: ImageRecord = images[request.generation_id]
        assert g.status == "ok" and g.error is None and g.run_id == "run-1"
        assert g.model == result.model and g.model_is_tiny_local and g.model.startswith("tiny-sd-")
        assert (g.prompt, g.seed, g.steps, g.width, g.height) == (request.prompt, request.seed, 2, 32, 32)
        # Street queries of the tiny default are composed from generated garments (generation/compose.py).
        composed = "ComposedScene(StableDiffusionPipeline)"
        assert g.pipeline_class == (composed if request.garments else "StableDiffusionPipeline")
        assert g.scheduler == "DDIMScheduler" and (g.layout_json is not None) == bool(request.garments)
        assert g.device == "cpu" and g.dtype == "float32" and g.template_version == request.template_version
        assert g.cpu_threads == 1 and g.batch_id and g.batch_position is not None
        assert json.loads(g.requested_attributes_json)[0]["item_id"] == g.item_ids[0]
        assert image.owner_kind == "generation" and image.source == "generation" and image.status == "ok"
        assert image.source_url == f"generated://{g.generation_id}" and image.sha256 == g.sha256
        assert (image.width, image.height, image.format) == (32, 32, "PNG")
        assert image.phash and image.phash_mirror and image.dhash and image.hash_method
        assert image.fetched_at == image.first_seen_at
        stored = Image.open(io.BytesIO(lake.get_image(g.sha256)))
        assert stored.size == (32, 32)
    street = [g for g in generations.values() if g.subset == "aigen_streetlook" and g.role == "query"]
    assert len(street) == 1 and 2 <= len(street[0].item_ids) <= 4

    again = run_generation(lake, settings, taxonomy(), "run-2", image_generator=tiny_generator())
    assert (again.generated, again.skipped_existing) == (0, len(planned))
    assert len(rows(lake, "generations")) == len(planned) and len(rows(lake, "images")) == len(planned)


def test_each_release_cycle_plans_new_ids_and_a_rerun_makes_nothing(tmp_path):
    """Monthly releases: a new version brings new images; rerunning a version makes none."""
    lake = Lake(tmp_path / "lake")
    settings = small_settings(studio_items=2, street_looks=1, gallery_per_item=1)
    months = {
        "v20261201": dt.datetime(2026, 12, 1, 3, 0, tzinfo=dt.UTC),
        "v20270101": dt.datetime(2027, 1, 1, 3, 0, tzinfo=dt.UTC),
    }
    ids: dict[str, set[str]] = {}
    for version, as_of in months.items():
        _, planned = plan_generation(settings, taxonomy(), cycle=version)
        ids[version] = {r.generation_id for r in planned}
        made = run_generation(
            lake,
            settings,
            taxonomy(),
            f"run-{version}",
            image_generator=tiny_generator(),
            now=as_of,
            cycle=version,
        )
        assert made.generated == len(planned) and made.skipped_existing == 0
        again = run_generation(
            lake,
            settings,
            taxonomy(),
            f"rerun-{version}",
            image_generator=tiny_generator(),
            now=as_of,
            cycle=version,
        )
        assert (again.generated, again.skipped_existing) == (0, len(planned))
    assert ids["v20261201"] and ids["v20270101"] and not ids["v20261201"] & ids["v20270101"]
    stored = {g.generation_id: g for g in rows(lake, "generations")}
    assert set(stored) == ids["v20261201"] | ids["v20270101"]
    # Rows are dated by their month's as-of, so each lands in its own release window.
    for version, as_of in months.items():
        assert {stored[i].first_seen_at for i in ids[version]} == {as_of}


@pytest.mark.parametrize("conditioning", ["ip_adapter", "img2img"])
def test_image_conditioned_query_is_linked_to_its_product(tmp_path, conditioning):
    lake = Lake(tmp_path / "lake")
    products = [
        ConditioningProduct("shop:red", product_photo(lake, (200, 20, 20)), "dress", {"color": "red"}),
        ConditioningProduct("shop:blue", product_photo(lake, (20, 20, 200)), "coat", {"color": "blue"}),
        # annotated but its photo never reached the lake: recorded, the others go on
        ConditioningProduct("shop:lost", "f" * 64, "skirt", {"color": "black"}),
    ]
    settings = small_settings(
        studio_items=0, street_looks=0, conditioned_share=1.0, conditioning=conditioning
    )
    result = run_generation(
        lake, settings, taxonomy(), "run-c", products=products, image_generator=tiny_generator()
    )
    generations = {g.conditioned_on: g for g in rows(lake, "generations")}
    assert set(generations) == {"shop:red", "shop:blue", "shop:lost"}
    for key in ("shop:red", "shop:blue"):
        g = generations[key]
        product = next(p for p in products if p.product_key == key)
        assert g.status == "ok" and g.role == "query" and g.subset == "aigen_studio"
        assert g.item_ids == [key] and g.conditioned_on_sha256 == product.sha256
        if conditioning == "img2img":
            assert g.pipeline_class == "StableDiffusionImg2ImgPipeline" and g.strength == settings.strength
            assert g.ip_adapter is None and g.conditioning_json is None
        else:  # text-to-image steered by the product photo through the IP-Adapter
            assert g.pipeline_class == "StableDiffusionPipeline" and g.strength is None
            assert g.ip_adapter == tiny_ip_adapter_name() and g.ip_adapter_scale == settings.ip_adapter_scale
            assert json.loads(g.conditioning_json) == [{"product_key": key, "sha256": product.sha256}]
        assert json.loads(g.requested_attributes_json) == [
            {"item_id": key, "category": product.category, "attributes": product.attributes}
        ]
    lost = generations["shop:lost"]
    assert lost.status == "failed" and lost.sha256 is None
    assert lost.error.startswith("conditioning_image_missing")
    assert result.generated == 2 and result.failed == 1 and set(result.failures) == {lost.generation_id}
    assert {i.owner_id for i in rows(lake, "images")} == {
        generations[k].generation_id for k in ("shop:red", "shop:blue")
    }


def test_street_looks_are_conditioned_on_every_real_garment_and_a_lost_photo_fails_that_look(tmp_path):
    lake = Lake(tmp_path / "lake")
    colors = {"top": (200, 20, 20), "pants": (20, 20, 200), "sneakers": (20, 200, 20), "bag": (90, 60, 30)}
    products = [
        ConditioningProduct(f"shop:{category}", product_photo(lake, rgb), category, {"color": "red"})
        for category, rgb in colors.items()
    ]
    settings = small_settings(
        studio_items=0, street_looks=3, conditioned_share=1.0, products_per_look=3, gallery_per_item=1
    )
    _, planned = plan_generation(settings, taxonomy(), products)
    looks = [r for r in planned if r.subset == "aigen_streetlook" and r.role == "query"]
    worn = [k for r in looks for k, _ in r.conditioning]
    lost_key = max(set(worn), key=worn.count)  # its photo goes missing: every look wearing it fails
    os.remove(lake.image_path(next(p.sha256 for p in products if p.product_key == lost_key)))

    result = run_generation(
        lake, settings, taxonomy(), "run-s", products=products, image_generator=tiny_generator()
    )
    sha_of = {p.product_key: p.sha256 for p in products}
    by_id = {g.generation_id: g for g in rows(lake, "generations")}
    assert len(by_id) == len(planned)
    for look in looks:
        g = by_id[look.generation_id]
        shown = [i for i in g.item_ids if i in sha_of]
        assert shown and g.ip_adapter == tiny_ip_adapter_name()
        # the provenance names every real garment's photo, failed or not
        assert json.loads(g.conditioning_json) == [{"product_key": k, "sha256": sha_of[k]} for k in shown]
        if lost_key in shown:
            assert g.status == "failed" and g.error.startswith("conditioning_image_missing")
            assert lost_key in g.error
        else:
            assert (
                g.status == "ok" and g.sha256 and g.pipeline_class == "ComposedScene(StableDiffusionPipeline)"
            )
    assert {by_id[look.generation_id].status for look in looks} == {"ok", "failed"}  # the others went on
    assert result.generated == len(planned) - result.failed
    galleries = [g for g in by_id.values() if g.role == "gallery"]
    assert galleries and not any(set(g.item_ids) & set(sha_of) for g in galleries)  # real photos instead


def test_a_failed_image_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    lake = Lake(tmp_path / "lake")
    settings = small_settings(studio_items=2, street_looks=0, gallery_per_item=1, batch_size=4)
    _, planned = plan_generation(settings, taxonomy())
    doomed = planned[1]
    generator = tiny_generator()
    original = generator._call

    def failing(requests, images):
        if any(r.generation_id == doomed.generation_id for r in requests):
            raise RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return original(requests, images)

    monkeypatch.setattr(generator, "_call", failing)
    result = run_generation(lake, settings, taxonomy(), "run-f", image_generator=generator)
    assert result.failed == 1 and result.generated == len(planned) - 1
    by_id = {g.generation_id: g for g in rows(lake, "generations")}
    assert len(by_id) == len(planned)
    assert by_id[doomed.generation_id].status == "failed"
    assert by_id[doomed.generation_id].error.startswith("out_of_memory:")
    assert all(g.status == "ok" for i, g in by_id.items() if i != doomed.generation_id)
    # a failed request is final for its id: the rerun does not loop on it
    again = run_generation(lake, settings, taxonomy(), "run-f2", image_generator=generator)
    assert again.generated == 0 and again.skipped_existing == len(planned)

    # a lone failure at the very start (batch of one) is recorded too, not taken for a setup error
    alone = Lake(tmp_path / "alone")
    one_by_one = settings.model_copy(update={"batch_size": 1})
    doomed = plan_generation(one_by_one, taxonomy())[1][0]  # `failing` now fails the first request
    result = run_generation(alone, one_by_one, taxonomy(), "run-a", image_generator=generator)
    assert result.failures.keys() == {doomed.generation_id} and result.generated == len(planned) - 1


def test_an_interrupted_run_resumes_without_regenerating(tmp_path):
    settings = small_settings(studio_items=2, street_looks=1, gallery_per_item=1, batch_size=2)
    _, planned = plan_generation(settings, taxonomy())
    assert len(planned) > 4

    reference = Lake(tmp_path / "reference")
    run_generation(reference, settings, taxonomy(), "ref", image_generator=tiny_generator())
    expected = {g.generation_id: g.sha256 for g in rows(reference, "generations")}

    lake = Lake(tmp_path / "lake")

    def stop_after_two_batches(done: int, total: int) -> None:
        if done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_generation(
            lake,
            settings,
            taxonomy(),
            "first",
            progress=stop_after_two_batches,
            image_generator=tiny_generator(),
        )
    assert len(rows(lake, "generations")) == 4

    result = run_generation(lake, settings, taxonomy(), "second", image_generator=tiny_generator())
    assert result.skipped_existing == 4 and result.generated == len(planned) - 4
    got = {g.generation_id: g.sha256 for g in rows(lake, "generations")}
    # same batches as the uninterrupted run, so the very same bytes
    assert got == expected
    assert len(rows(lake, "images")) == len(planned)
    assert {g.run_id for g in rows(lake, "generations")} == {"first", "second"}


def test_a_half_committed_batch_is_generated_whole_again_with_the_same_bits(tmp_path, monkeypatch):
    """A kill between a batch's rows (half of them committed): the rerun makes the plan's batch
    again, not a regrouping of what is missing, so each image keeps its bits and batch_id."""
    settings = small_settings(studio_items=3, street_looks=0, gallery_per_item=1, batch_size=4)
    reference = Lake(tmp_path / "reference")
    run_generation(reference, settings, taxonomy(), "ref", image_generator=tiny_generator())
    expected = {g.generation_id: (g.sha256, g.batch_id) for g in rows(reference, "generations")}
    assert len(expected) >= 6 and len({b for _, b in expected.values()}) >= 2

    lake = Lake(tmp_path / "lake")
    real_append = Lake.append

    def append_half_then_die(self, records):
        records = list(records)
        if records and type(records[0]).__table__ == "generations":
            real_append(self, records[: len(records) // 2])
            raise KeyboardInterrupt
        return real_append(self, records)

    monkeypatch.setattr(Lake, "append", append_half_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_generation(lake, settings, taxonomy(), "killed", image_generator=tiny_generator())
    monkeypatch.setattr(Lake, "append", real_append)
    half = len(rows(lake, "generations"))
    assert 0 < half < 4

    result = run_generation(lake, settings, taxonomy(), "rerun", image_generator=tiny_generator())
    assert result.skipped_existing == half and result.generated == len(expected) - half
    got = {g.generation_id: (g.sha256, g.batch_id) for g in rows(lake, "generations")}
    assert got == expected


KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    from generation_fixtures import small_settings, taxonomy
    from lookbench_live.generation.runner import ImageGenerator
    from lookbench_live.generation.synthesis import run_generation
    from lookbench_live.warehouse.lake import Lake

    def kill_after_first_batch(done, total):
        if done >= 2:
            os.kill(os.getpid(), signal.SIGKILL)

    settings = small_settings(studio_items=2, street_looks=0, gallery_per_item=1, batch_size=2)
    generator = ImageGenerator({model!r}, device="cpu", cpu_threads=1)
    run_generation(Lake({lake!r}), settings, taxonomy(), "killed", progress=kill_after_first_batch,
                   image_generator=generator)
    """
)


@pytest.mark.slow
def test_a_sigkilled_run_resumes_and_writes_no_duplicates(tmp_path):
    lake_dir = tmp_path / "lake"
    script = KILLED_RUN.format(
        tests=str(Path(__file__).parents[1]), model=str(tiny_dir()), lake=str(lake_dir)
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]

    lake = Lake(lake_dir)
    assert len(rows(lake, "generations")) == 2
    lake.reconcile()
    settings = small_settings(studio_items=2, street_looks=0, gallery_per_item=1, batch_size=2)
    result = run_generation(lake, settings, taxonomy(), "resumed", image_generator=tiny_generator())
    assert result.skipped_existing == 2 and result.generated == result.planned - 2
    generations = rows(lake, "generations")
    assert len(generations) == len({g.generation_id for g in generations}) == result.planned
    assert len(rows(lake, "images")) == result.planned


def test_a_setting_every_image_fails_on_is_a_setup_error_not_failed_rows(tmp_path):
    from lookbench_live.generation.runner import GenerationSetupError

    lake = Lake(tmp_path / "lake")
    settings = small_settings(width=36, height=36, studio_items=1, street_looks=0)  # SD needs multiples of 8
    with pytest.raises(GenerationSetupError, match="divisible by 8"):
        run_generation(lake, settings, taxonomy(), "bad-size", image_generator=tiny_generator())
    assert rows(lake, "generations") == [] and rows(lake, "images") == []


def test_rows_are_stamped_with_the_runs_as_of_time(tmp_path):
    lake = Lake(tmp_path / "lake")
    as_of = dt.datetime(2026, 12, 1, 3, 0, tzinfo=dt.UTC)
    settings = small_settings(studio_items=1, street_looks=0)
    run_generation(lake, settings, taxonomy(), "as-of", image_generator=tiny_generator(), now=as_of)
    assert {g.first_seen_at for g in rows(lake, "generations")} == {as_of}
    assert {(i.fetched_at, i.first_seen_at) for i in rows(lake, "images")} == {(as_of, as_of)}
    with pytest.raises(ValueError, match="timezone-aware"):
        run_generation(lake, settings, taxonomy(), "naive", now=dt.datetime(2026, 12, 1))


def test_rows_written_before_the_conditioning_columns_still_read(tmp_path):
    """A `generations` fragment of the old schema (no conditioning_json / ip_adapter columns)
    reads back with nulls, and its release provenance names its img2img product."""
    import pyarrow.parquet as pq

    from lookbench_live.warehouse.assemble import _generation_provenance

    lake = Lake(tmp_path / "lake")
    # An img2img row written before conditioning_json existed: conditioned_on* say it all.
    old = factories.generation(
        "a" * 64, item_ids=["shop:1"], model="m", pipeline_class="StableDiffusionImg2ImgPipeline",
        prompt="p", negative_prompt="n", template_version="v", guidance=5.0, width=32, height=32,
        scheduler="DDIMScheduler", conditioned_on="shop:1", conditioned_on_sha256="b" * 64, strength=0.6,
        sha256="c" * 64,
    )  # fmt: skip
    lake.append([old])
    [fragment] = lake.fragments("generations")
    table = pq.read_table(fragment).drop_columns(["conditioning_json", "ip_adapter", "ip_adapter_scale"])
    pq.write_table(table, fragment)  # as a run before this change wrote it
    [row] = rows(lake, "generations")
    assert row.conditioning_json is None and row.ip_adapter is None and row.conditioned_on == "shop:1"
    provenance = _generation_provenance(row)
    assert provenance["conditioning"] == [{"product_key": "shop:1", "sha256": "b" * 64}]
    assert provenance["ip_adapter"] is None and provenance["strength"] == 0.6
