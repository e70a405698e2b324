"""The tiny pipeline and the diffusers runner: by-path loading, bit-identity, failure isolation."""

from __future__ import annotations

import functools
import hashlib
import json

import numpy as np
import pytest
from generation_fixtures import small_settings, taxonomy, tiny_adapter, tiny_dir, tiny_generator

from lookbench_live.generation.plan import GenerationRequest
from lookbench_live.generation.prompts import ItemSpec
from lookbench_live.generation.runner import ImageGenerator, batched
from lookbench_live.generation.synthesis import plan_generation
from lookbench_live.generation.tiny import ensure_tiny_pipeline, tiny_vocabulary


def request(prompt: str = "a red dress", seed: int = 1, **overrides: object) -> GenerationRequest:
    values: dict[str, object] = {
        "subset": "aigen_studio",
        "role": "query",
        "item_ids": ("aigen:0000000000000000",),
        "mode": "text2img",
        "prompt": prompt,
        "negative_prompt": "blurry",
        "template_version": "test",
        "seed": seed,
        "steps": 2,
        "guidance": 5.0,
        "width": 32,
        "height": 32,
        "scheduler": "default",
        "dtype": "float32",
        "model": "tiny",
        "requested": (ItemSpec("aigen:0000000000000000", "dress", (("color", "red"),)),),
    }
    values.update(overrides)
    return GenerationRequest(**values)  # type: ignore[arg-type]


def test_tiny_pipeline_is_saved_in_diffusers_layout_and_loads_back_by_path():
    folder = tiny_dir()
    index = json.loads((folder / "model_index.json").read_text())
    assert index["_class_name"] == "StableDiffusionPipeline"
    for part in ("unet", "vae", "text_encoder", "tokenizer", "scheduler"):
        assert (folder / part).is_dir(), part
    generator = tiny_generator()
    assert generator.model == str(folder)  # loaded through from_pretrained(path)
    assert type(generator.pipeline).__name__ == "StableDiffusionPipeline"
    assert generator.scheduler_class == "DDIMScheduler"
    # Known words are single tokens: prompts fit CLIP's 77 tokens and stay distinct.
    ids = generator.pipeline.tokenizer("a red dress").input_ids
    assert len(ids) == 5
    assert generator.pipeline.tokenizer("zzqx").input_ids[1:-1]  # unknown words still encode (bytes)


def test_tiny_pipeline_build_is_deterministic_and_done_once(tmp_path):
    words = ["dress", "red", "studio"]
    first, name = ensure_tiny_pipeline(tmp_path / "a", words)
    stamp = (first / "unet" / "diffusion_pytorch_model.safetensors").stat().st_mtime_ns
    again, same_name = ensure_tiny_pipeline(tmp_path / "a", words)
    assert (again, same_name) == (first, name)
    assert (first / "unet" / "diffusion_pytorch_model.safetensors").stat().st_mtime_ns == stamp
    other, _ = ensure_tiny_pipeline(tmp_path / "b", words)
    for part in ("unet/diffusion_pytorch_model.safetensors", "text_encoder/model.safetensors"):
        assert (
            hashlib.sha256((first / part).read_bytes()).digest()
            == hashlib.sha256((other / part).read_bytes()).digest()
        )
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".tmp-")]
    vocab, merges = tiny_vocabulary(words)
    assert ("d", "r") in merges
    assert "dress</w>" in vocab and len(vocab) == len(set(vocab.values()))


def test_same_request_gives_bit_identical_png_on_cpu():
    generator = tiny_generator()
    a = generator.generate([request()])[0]
    b = generator.generate([request()])[0]
    assert a.ok and b.ok and a.png == b.png
    assert (a.width, a.height) == (32, 32)
    other_seed = generator.generate([request(seed=2)])[0]
    other_prompt = generator.generate([request(prompt="a blue coat")])[0]
    assert other_seed.png != a.png and other_prompt.png != a.png
    # the same batch, twice: identical images, position by position
    batch = [request(seed=s) for s in (1, 2, 3)]
    first = generator.generate(batch)
    second = generator.generate(batch)
    assert [o.png for o in first] == [o.png for o in second]
    assert len({o.batch_id for o in first}) == 1 and [o.batch_position for o in first] == [0, 1, 2]


def test_request_identity_covers_every_parameter():
    base = request()
    assert base.generation_id == request().generation_id
    for change in (
        {"seed": 9},
        {"steps": 3},
        {"guidance": 1.0},
        {"width": 64},
        {"scheduler": "EulerDiscreteScheduler"},
        {"model": "other"},
        {"prompt": "x"},
        {"role": "gallery"},
        {"dtype": "float16"},
        {"conditioning": (("shop:1", "0" * 64),)},
        {"adapter": "other-adapter"},
        {"adapter_scale": 0.5},
    ):
        assert request(**change).generation_id != base.generation_id, change


def test_a_failing_image_is_isolated_and_the_batch_goes_on(monkeypatch):
    generator = tiny_generator()
    pipe = generator.pipeline
    original = type(pipe).__call__

    @functools.wraps(original)  # keeps the signature the runner inspects
    def poisoned(self, *args, **kwargs):
        if any("POISON" in p for p in kwargs["prompt"]):
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(pipe), "__call__", poisoned)
    batch = [request(seed=1), request("POISON dress", seed=2), request(seed=3)]
    outcomes = generator.generate(batch)
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].error.startswith("out_of_memory:")
    monkeypatch.undo()
    alone = generator.generate([request(seed=1)])[0]
    assert alone.png == outcomes[0].png  # the retry ran it alone, as a batch of one


def test_nan_output_is_a_recorded_failure(monkeypatch):
    generator = tiny_generator()
    pipe = generator.pipeline
    original = type(pipe).__call__

    @functools.wraps(original)
    def nan_images(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        out.images[0] = np.full_like(out.images[0], np.nan)
        return out

    monkeypatch.setattr(type(pipe), "__call__", nan_images)
    outcomes = generator.generate([request(seed=1), request(seed=2)])
    assert not outcomes[0].ok and outcomes[0].error.startswith("nan_output")
    assert outcomes[1].ok


def test_img2img_from_the_same_components(tmp_path):
    from PIL import Image

    generator = tiny_generator()
    photo = Image.new("RGB", (50, 70), (200, 30, 30))
    conditioned = request(
        mode="img2img", strength=0.6, conditioned_on="shop:1", conditioned_on_sha256="0" * 64
    )
    a = generator.generate([conditioned], [photo])[0]
    b = generator.generate([conditioned], [photo])[0]
    assert a.ok and a.png == b.png and (a.width, a.height) == (32, 32)
    assert a.pipeline_class == "StableDiffusionImg2ImgPipeline"
    assert generator.img2img.unet is generator.pipeline.unet  # no second copy of the weights
    missing = generator.generate([conditioned], [None])[0]
    assert not missing.ok and "conditioning image" in missing.error


def test_batches_group_compatible_requests_in_stable_order():
    _, requests = plan_generation(small_settings(studio_items=5, gallery_per_item=2), taxonomy(), ())
    batches = batched(requests, 4)
    assert all(len(b) <= 4 and len({r.batch_key() for r in b}) == 1 for b in batches)
    assert sorted(r.generation_id for b in batches for r in b) == sorted(r.generation_id for r in requests)
    assert batched(requests, 4) == batches


def test_unknown_scheduler_or_model_is_a_clear_setup_error(tmp_path):
    from lookbench_live.generation.runner import GenerationSetupError

    with pytest.raises(GenerationSetupError, match=r"generation.scheduler 'NoSuchScheduler'"):
        ImageGenerator(str(tiny_dir()), device="cpu", scheduler="NoSuchScheduler").pipeline  # noqa: B018
    with pytest.raises(GenerationSetupError, match="cannot load diffusion pipeline"):
        ImageGenerator(str(tmp_path / "nothing-here"), device="cpu").pipeline  # noqa: B018
    swapped = ImageGenerator(str(tiny_dir()), device="cpu", scheduler="EulerDiscreteScheduler", cpu_threads=1)
    assert swapped.scheduler_class == "EulerDiscreteScheduler"
    assert swapped.generate([request(scheduler="EulerDiscreteScheduler")])[0].ok


def photo(seed: int):
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (48, 40, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def ip_request(garments: int = 1, **overrides: object) -> GenerationRequest:
    values: dict[str, object] = {
        "mode": "ip_adapter",
        "conditioning": tuple((f"shop:{n}", f"{n:064x}") for n in range(garments)),
        "adapter": tiny_adapter().name,
        "adapter_scale": 1.0,
    }
    values.update(overrides)
    return request(**values)


def test_the_tiny_ip_adapter_loads_through_diffusers_loader_and_steers_the_image():
    """The adapter is read by `pipe.load_ip_adapter` (image encoder, image projection and
    per-layer to_k_ip/to_v_ip weights); its photos change the image, the seed fixes it."""
    from diffusers.models.attention_processor import IPAdapterAttnProcessor2_0

    generator = tiny_generator()
    plain = generator.generate([request()])[0]
    conditioned = generator.generate([ip_request()], [[photo(1)]])[0]
    again = generator.generate([ip_request()], [[photo(1)]])[0]
    other_photo = generator.generate([ip_request()], [[photo(2)]])[0]
    other_seed = generator.generate([ip_request(seed=2)], [[photo(1)]])[0]
    assert conditioned.ok and conditioned.pipeline_class == "StableDiffusionPipeline"
    assert conditioned.png == again.png  # deterministic per seed and photo
    assert conditioned.png != plain.png  # same prompt and seed, conditioned on a photo: another image
    assert len({conditioned.png, other_photo.png, other_seed.png}) == 3
    pipe = generator.pipeline
    assert type(pipe.image_encoder).__name__ == "CLIPVisionModelWithProjection"
    assert any(isinstance(p, IPAdapterAttnProcessor2_0) for p in pipe.unet.attn_processors.values())
    # Unconditioned requests run with the adapter unloaded: the same bytes as before it was loaded.
    after = generator.generate([request()])[0]
    assert after.png == plain.png and pipe.image_encoder is None


def test_each_prompt_of_a_batch_gets_its_own_photos_one_per_garment():
    generator = tiny_generator()
    look = ip_request(garments=3, prompt="a woman in a top, pants and sneakers")
    batch = generator.generate([look, look], [[photo(1), photo(2), photo(3)], [photo(1), photo(2), photo(4)]])
    assert all(o.ok for o in batch) and batch[0].png != batch[1].png  # one garment photo differs
    repeat = generator.generate(
        [look, look], [[photo(1), photo(2), photo(3)], [photo(1), photo(2), photo(4)]]
    )
    assert [o.png for o in repeat] == [o.png for o in batch]
    weaker = generator.generate([ip_request(garments=3, adapter_scale=0.0)], [[photo(1), photo(2), photo(3)]])
    assert weaker[0].ok and weaker[0].png != batch[0].png  # the scale reaches the pipeline
    short = generator.generate([look], [[photo(1)]])[0]  # fewer photos than garments: that image fails
    assert not short.ok and "1 photos for 3 garments" in short.error


def test_an_ip_adapter_that_does_not_fit_is_a_setup_error(tmp_path):
    from lookbench_live.generation.runner import GenerationSetupError, IPAdapterSpec

    missing = IPAdapterSpec(str(tmp_path), "models", "ip-adapter_tiny.safetensors", "image_encoder", "x")
    generator = ImageGenerator(str(tiny_dir()), device="cpu", cpu_threads=1, ip_adapter=missing)
    with pytest.raises(GenerationSetupError, match="cannot load IP-Adapter"):
        generator.generate([ip_request()], [[photo(1)]])
    bare = ImageGenerator(str(tiny_dir()), device="cpu", cpu_threads=1)
    with pytest.raises(GenerationSetupError, match="needs an IP-Adapter"):
        bare.generate([ip_request()], [[photo(1)]])
