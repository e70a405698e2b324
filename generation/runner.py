"""The diffusers runner: requests in, images (or per-image errors) out.

`ImageGenerator` loads any text-to-image pipeline with
`DiffusionPipeline.from_pretrained(model_id_or_path)` (a hub id such as SDXL, SD3 or
FLUX, or a local folder such as the tiny pipeline) and derives the image-to-image
pipeline from the same components (`AutoPipelineForImage2Image.from_pipe`). Requests in
`ip_adapter` mode run the text-to-image pipeline with an IP-Adapter
(`pipe.load_ip_adapter`, diffusers' own loader) fed one product photo per garment.

What a caller may rely on:
- Each image's initial noise comes from its own CPU `torch.Generator` seeded with the
  request's seed, so an image depends only on its request, not on its neighbours'
  seeds. On CPU the same request in the same batch (same `batch_id`) gives a
  bit-identical image with the same torch thread count; a different batch composition
  or thread count can change a few pixel values by one level (matrix products round
  differently), which is why every row records its `batch_id` and `cpu_threads`.
- One failing image never loses the batch: a failed batch is retried one image at a
  time and only the images that fail alone are reported as failures, with a reason
  (`out_of_memory: …`, `nan_output`, or the exception).
"""

from __future__ import annotations

import inspect
import io
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

from PIL import Image

from lookbench_live.generation.plan import GenerationRequest

log = logging.getLogger(__name__)

DTYPES = ("float32", "float16", "bfloat16")

# What a request starts from: nothing (text2img), one photo (img2img), or one photo per
# conditioning garment (ip_adapter).
Conditioning: TypeAlias = "Image.Image | Sequence[Image.Image] | None"


@dataclass(frozen=True, slots=True)
class IPAdapterSpec:
    """An IP-Adapter as `pipe.load_ip_adapter(source, subfolder=, weight_name=,
    image_encoder_folder=)` takes it; `name` is what requests and rows record."""

    source: str  # hub id (from the local cache) or folder
    subfolder: str
    weight_name: str
    image_encoder_folder: str
    name: str


class GenerationSetupError(RuntimeError):
    """The pipeline cannot be loaded or configured as asked; the message says what to change."""


@dataclass(slots=True)
class ImageOutcome:
    """The result of one request: PNG bytes and size, or an error with a reason."""

    request: GenerationRequest
    png: bytes | None = None
    width: int | None = None
    height: int | None = None
    error: str | None = None
    seconds: float = 0.0
    batch_id: str = ""
    batch_position: int = 0
    pipeline_class: str = ""
    layout_json: str | None = None  # a composed scene's garment boxes (generation/compose.py)

    @property
    def ok(self) -> bool:
        return self.png is not None


def png_bytes(image: Image.Image) -> bytes:
    """Deterministic PNG encoding (no timestamps or text chunks)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def describe_error(exc: BaseException) -> str:
    """A machine-readable reason prefix, then the message."""
    import torch

    message = " ".join(str(exc).split())[:500]
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in message.lower():
        return f"out_of_memory: {message}"
    return f"{type(exc).__name__}: {message}"


class ImageGenerator:
    """A loaded diffusion pipeline that turns batches of requests into images."""

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        dtype: str = "float32",
        scheduler: str | None = None,
        attention_slicing: bool = False,
        cpu_offload: bool = False,
        cpu_threads: int | None = None,
        ip_adapter: IPAdapterSpec | None = None,
    ):
        if dtype not in DTYPES:
            raise GenerationSetupError(f"generation.dtype {dtype!r} is not one of {DTYPES}")
        self.model = model
        self.device = device or default_device()
        self.dtype = dtype
        self.scheduler_name = scheduler
        self.attention_slicing = attention_slicing
        self.cpu_offload = cpu_offload
        # One thread unless asked: CPU bits depend on the thread count, and on busy 2-core
        # machines two OpenMP threads spin-wait (measured 20-40x slower than one).
        self.cpu_threads = cpu_threads or 1
        self.ip_adapter = ip_adapter
        self._text2img: Any = None
        self._img2img: Any = None
        self._adapter_loaded = False

    # ------------------------------------------------------------------ loading
    @property
    def pipeline(self) -> Any:
        if self._text2img is None:
            self._text2img = self._load()
        return self._text2img

    @property
    def img2img(self) -> Any:
        if self._img2img is None:
            from diffusers import AutoPipelineForImage2Image

            try:
                self._img2img = AutoPipelineForImage2Image.from_pipe(self.pipeline)
            except (ValueError, KeyError) as exc:
                raise GenerationSetupError(
                    f"{type(self.pipeline).__name__} ({self.model}) has no image-to-image counterpart in diffusers; "
                    "set generation.conditioned_share = 0 or use a model with an Img2Img pipeline"
                ) from exc
            self._img2img.set_progress_bar_config(disable=True)
        return self._img2img

    def _with_adapter(self, loaded: bool) -> None:
        """Load or unload the IP-Adapter. Its attention processors live in the UNet that the
        text-to-image and image-to-image pipelines share, and they need image embeddings on
        every call, so other modes run with it unloaded (diffusers' default processors)."""
        if loaded == self._adapter_loaded:
            return
        pipe = self.pipeline
        if not loaded:
            pipe.unload_ip_adapter()
            self._adapter_loaded = False
            if self.attention_slicing and hasattr(pipe, "enable_attention_slicing"):
                pipe.enable_attention_slicing()  # unloading resets the attention processors
            self._reoffload(pipe)
            return
        spec = self.ip_adapter
        if spec is None:
            raise GenerationSetupError(
                "an ip_adapter request needs an IP-Adapter: set generation.ip_adapter (for example "
                "h94/IP-Adapter) or generation.conditioning = 'img2img'"
            )
        if not hasattr(pipe, "load_ip_adapter") or not hasattr(pipe, "encode_image"):
            raise GenerationSetupError(
                f"{type(pipe).__name__} ({self.model}) cannot take an IP-Adapter in diffusers; "
                "set generation.conditioning = 'img2img'"
            )
        try:
            pipe.load_ip_adapter(
                spec.source,
                subfolder=spec.subfolder,
                weight_name=spec.weight_name,
                image_encoder_folder=spec.image_encoder_folder,
            )
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            # RuntimeError: weights shaped for another base model (an SD 1.5 adapter on SDXL).
            raise GenerationSetupError(
                f"cannot load IP-Adapter {spec.source!r} ({spec.subfolder}/{spec.weight_name}, image encoder "
                f"{spec.image_encoder_folder!r}) into {self.model!r}: {' '.join(str(exc).split())[:400]}. "
                "It must match the base model and be in the local cache (runs are offline)"
            ) from exc
        self._adapter_loaded = True
        self._reoffload(pipe)

    def _reoffload(self, pipe: Any) -> None:
        # The adapter's image encoder arrives after offloading was set up; enabling it again
        # puts the encoder under the offload hooks too (it is in the pipelines' offload sequence).
        # Not run here: offloading needs `accelerate` and a GPU.
        if self.cpu_offload and self.device != "cpu":
            pipe.enable_model_cpu_offload()

    def _load(self) -> Any:
        import diffusers
        import torch
        from diffusers import DiffusionPipeline

        # A prompt over the text encoder's 77 tokens is cut at the end (items come before the
        # scene, so scene details go first); diffusers warns once per prompt, which floods logs.
        diffusers.utils.logging.set_verbosity_error()
        # diffusers renamed `torch_dtype` to `dtype` (the old name warns since 0.36).
        new_name = "dtype" if "_resolve_dtype" in vars(diffusers.pipelines.pipeline_utils) else "torch_dtype"
        try:
            pipe = DiffusionPipeline.from_pretrained(self.model, **{new_name: getattr(torch, self.dtype)})
        except (OSError, ValueError) as exc:
            raise GenerationSetupError(
                f"cannot load diffusion pipeline {self.model!r}: {exc}. Set generation.model to a local "
                "pipeline folder or a model id present in the Hugging Face cache (no hub is reachable offline)"
            ) from exc
        if self.scheduler_name:
            scheduler_cls = getattr(diffusers, self.scheduler_name, None)
            if scheduler_cls is None or not hasattr(scheduler_cls, "from_config"):
                raise GenerationSetupError(
                    f"generation.scheduler {self.scheduler_name!r} is not a diffusers scheduler"
                )
            pipe.scheduler = scheduler_cls.from_config(pipe.scheduler.config)
        if self.attention_slicing and hasattr(pipe, "enable_attention_slicing"):
            pipe.enable_attention_slicing()
        if self.cpu_offload and self.device != "cpu":
            try:
                pipe.enable_model_cpu_offload()
            except (ImportError, RuntimeError, ValueError) as exc:
                raise GenerationSetupError(
                    f"generation.cpu_offload needs the `accelerate` package and a GPU: {exc}"
                ) from exc
        else:
            pipe = pipe.to(self.device)
        pipe.set_progress_bar_config(disable=True)
        return pipe

    @property
    def scheduler_class(self) -> str:
        return type(self.pipeline.scheduler).__name__

    # ------------------------------------------------------------------ generating
    def generate(
        self, requests: Sequence[GenerationRequest], init_images: Sequence[Conditioning] | None = None
    ) -> list[ImageOutcome]:
        """Images for requests sharing one `batch_key()`; per-image errors, never a lost batch.
        `init_images[i]`: request i's photo (img2img) or its photos in garment order (ip_adapter)."""
        if not requests:
            return []
        if len({r.batch_key() for r in requests}) != 1:
            raise ValueError("generate() takes requests with one batch_key(); group them first")
        images = list(init_images) if init_images is not None else [None] * len(requests)
        if requests[0].mode == "ip_adapter" and len(requests) > 1:
            # diffusers repeats the adapter's embeddings for every prompt of a call (one set of
            # photos per call), so each look with its own photos is its own call.
            return [o for r, i in zip(requests, images, strict=True) for o in self.generate([r], [i])]
        batch_id = batch_identity(requests)
        try:
            started = time.perf_counter()
            arrays = self._call(requests, images)
            seconds = (time.perf_counter() - started) / len(requests)
            outcomes = [
                self._outcome(r, a, seconds, batch_id, i)
                for i, (r, a) in enumerate(zip(requests, arrays, strict=True))
            ]
        except GenerationSetupError:
            raise  # a configuration problem fails the run, not each image
        except Exception as exc:
            self._release_memory()
            if len(requests) == 1:
                return [ImageOutcome(requests[0], error=describe_error(exc), batch_id=batch_id)]
            # Isolate the culprit: one bad prompt or an OOM at this batch size should not
            # cost its neighbours their images.
            log.warning(
                "batch of %d failed (%s); retrying one image at a time", len(requests), describe_error(exc)
            )
            outcomes = []
            for request, image in zip(requests, images, strict=True):
                outcomes.extend(self.generate([request], [image]))
        return outcomes

    def _call(self, requests: Sequence[GenerationRequest], images: Sequence[Conditioning]) -> list[Any]:
        import torch

        first = requests[0]
        img2img = first.mode == "img2img"
        self._with_adapter(first.mode == "ip_adapter")
        pipe = self.img2img if img2img else self.pipeline
        accepted = set(inspect.signature(pipe.__call__).parameters)
        # CPU generators: the initial noise is the same on every device for a given seed.
        generators = [torch.Generator(device="cpu").manual_seed(r.seed) for r in requests]
        kwargs: dict[str, Any] = {
            "prompt": [r.prompt for r in requests],
            "num_inference_steps": first.steps,
            "guidance_scale": first.guidance,
            "generator": generators,
            "output_type": "np",
        }
        if "negative_prompt" in accepted:
            kwargs["negative_prompt"] = [r.negative_prompt for r in requests]
        if img2img:
            if any(image is None for image in images):
                raise ValueError("image-to-image request without its conditioning image")
            kwargs["image"] = [image.convert("RGB").resize((first.width, first.height)) for image in images]  # type: ignore[union-attr]
            kwargs["strength"] = first.strength
        else:
            kwargs["height"], kwargs["width"] = first.height, first.width
        with torch.inference_mode(), self._threads():
            if first.mode == "ip_adapter":
                if "ip_adapter_image_embeds" not in accepted:
                    raise GenerationSetupError(f"{type(pipe).__name__} takes no ip_adapter_image_embeds")
                kwargs["ip_adapter_image_embeds"] = self._ip_embeds(pipe, requests, images)
                pipe.set_ip_adapter_scale(first.adapter_scale)
            output = pipe(**kwargs)
        arrays = list(output.images)
        if len(arrays) != len(requests):
            raise RuntimeError(f"pipeline returned {len(arrays)} images for {len(requests)} prompts")
        return arrays

    def _ip_embeds(
        self, pipe: Any, requests: Sequence[GenerationRequest], images: Sequence[Conditioning]
    ) -> list[Any]:
        """The request's photos as the adapter's image embeddings (one request per call).

        Made with the pipeline's own `encode_image` and passed as `ip_adapter_image_embeds`:
        per adapter one tensor [1, photos, ...], the unconditional half first under
        classifier-free guidance (the layout `prepare_ip_adapter_image_embeds` expects). One
        adapter takes all of a look's garment photos as its images: their tokens are
        concatenated, one group of 4 tokens per garment.
        """
        import torch
        from diffusers.models.embeddings import ImageProjection

        per_request: list[list[Image.Image]] = []
        for request, given in zip(requests, images, strict=True):
            photos = [given] if isinstance(given, Image.Image) else list(given or [])
            if len(photos) != len(request.conditioning) or not photos:
                raise ValueError(
                    f"ip_adapter request with {len(photos)} photos for {len(request.conditioning)} garments"
                )
            per_request.append([p.convert("RGB") for p in photos])
        layers = pipe.unet.encoder_hid_proj.image_projection_layers
        hidden = not isinstance(layers[0], ImageProjection)  # Plus adapters read hidden states
        flat = [photo for photos in per_request for photo in photos]
        positive, negative = pipe.encode_image(flat, pipe._execution_device, 1, hidden)
        shape = (len(per_request), len(per_request[0]), *positive.shape[1:])
        positive, negative = positive.reshape(shape), negative.reshape(shape)
        guided = requests[0].guidance > 1 and getattr(pipe.unet.config, "time_cond_proj_dim", None) is None
        embeds = torch.cat([negative, positive]) if guided else positive
        return [embeds] * len(layers)

    def _outcome(
        self, request: GenerationRequest, array: Any, seconds: float, batch_id: str, position: int
    ) -> ImageOutcome:
        import numpy as np

        pipeline_class = type(self.img2img if request.mode == "img2img" else self.pipeline).__name__
        values = np.asarray(array, dtype=np.float32)
        if not np.isfinite(values).all():
            return ImageOutcome(
                request,
                error="nan_output: the pipeline produced NaN or infinite pixels",
                seconds=seconds,
                batch_id=batch_id,
                batch_position=position,
                pipeline_class=pipeline_class,
            )
        # The same rounding as diffusers' numpy_to_pil.
        pixels = (np.clip(values, 0, 1) * 255).round().astype("uint8")
        image = Image.fromarray(pixels)
        return ImageOutcome(
            request,
            png=png_bytes(image),
            width=image.width,
            height=image.height,
            seconds=seconds,
            batch_id=batch_id,
            batch_position=position,
            pipeline_class=pipeline_class,
        )

    @property
    def threads_used(self) -> int | None:
        """Torch threads a CPU call runs with (CPU results depend on it); None on GPUs."""
        if self.device != "cpu":
            return None
        return self.cpu_threads

    @contextmanager
    def _threads(self) -> Iterator[None]:
        # torch's thread count is process-wide: set it for the call only, so other
        # stages in the same process keep theirs.
        if self.device != "cpu":
            yield
            return
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(self.cpu_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)

    def _release_memory(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def batch_identity(requests: Sequence[GenerationRequest]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(r.generation_id for r in requests).encode()).hexdigest()


def batched(requests: Sequence[GenerationRequest], batch_size: int) -> list[list[GenerationRequest]]:
    """Consecutive runs of one `batch_key()`, cut at `batch_size` (at 1 for ip_adapter requests,
    which diffusers runs one per call): stable for a stable request list."""
    batches: list[list[GenerationRequest]] = []
    groups: dict[tuple[Any, ...], list[GenerationRequest]] = {}
    for request in requests:
        groups.setdefault(request.batch_key(), []).append(request)
    for key, group in groups.items():
        size = 1 if key[0] == "ip_adapter" else batch_size
        batches.extend(group[i : i + size] for i in range(0, len(group), size))
    return batches
