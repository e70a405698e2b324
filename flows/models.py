"""`lookbench-live models pull`: download every model the configuration names, once, ahead of runs.

Production runs stay offline (`HF_HUB_OFFLINE=1` in the worker): a model that is not in the
cache fails the stage that needs it instead of downloading 10-150 GB in the middle of a
release. This command is the one step that goes online. It fills the Hugging Face hub cache
(the worker's `HF_HOME`, a named volume the vLLM service shares) with a snapshot of each
configured model id, and says for each which host it tried and why it failed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from lookbench_live.evaluation.model_spec import hub_repo_id, is_local

# Weight formats no stage here loads (ONNX, OpenVINO, Flax, TensorFlow, Core ML): skipping them
# keeps an SDXL snapshot at about 14 GB instead of 70.
IGNORE_PATTERNS = (
    "*.onnx",
    "*.onnx_data",
    "*openvino*",
    "*.msgpack",
    "*.h5",
    "*.ot",
    "*.tflite",
    "*.mlmodel",
    "*.mlpackage/*",
    "*.pb",
)


class ModelPullError(RuntimeError):
    """One or more models could not be downloaded; the message names each model and the host."""


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A model id the configuration names, and the setting that names it."""

    repo_id: str
    setting: str


@dataclass(frozen=True, slots=True)
class PullResult:
    model: ModelRef
    path: str | None  # the snapshot folder, None on failure
    error: str | None = None


def configured_models(settings: Any) -> list[ModelRef]:
    """Every Hugging Face model id the settings name, once each, in stage order.

    Left out: the tiny local generator (`generation.model` unset), local paths, `open_clip:`
    specs (open_clip fetches its own weights), and the annotation model when no VLM is
    configured (`annotation.base_url` and `base_urls` unset: the metadata prior is the annotation).
    An evaluation spec's options (`srpone/gr-lite?dim=256`) change how it embeds, not what is
    downloaded: the repository is pulled once for all its variants.
    """
    found: list[ModelRef] = []

    def add(value: str | None, setting: str) -> None:
        if not value or value.startswith("open_clip:") or is_local(value):
            return
        value = hub_repo_id(value) if setting == "evaluation.models" else value
        if value is None:
            return
        if all(ref.repo_id != value for ref in found):
            found.append(ModelRef(value, setting))

    add(settings.generation.model, "generation.model")
    if settings.generation.conditioning == "ip_adapter":
        add(settings.generation.ip_adapter, "generation.ip_adapter")
    if settings.annotation.endpoints:
        add(settings.annotation.model, "annotation.model")
    add(settings.dedup.embedding_model, "dedup.embedding_model")
    for model in settings.evaluation.models:
        add(model, "evaluation.models")
    return found


def hub_endpoint() -> str:
    """The host downloads go to (`HF_ENDPOINT`, default https://huggingface.co)."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def _offline_env() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def pull_models(
    models: Iterable[ModelRef],
    *,
    cache_dir: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    download: Callable[..., str] | None = None,
    on_result: Callable[[PullResult], None] | None = None,
) -> list[PullResult]:
    """Download each model's snapshot into ``cache_dir`` (default: the hub cache of ``HF_HOME``)
    from ``endpoint`` (default: ``HF_ENDPOINT``, else https://huggingface.co).

    Every model is tried even after a failure, so one run reports everything that is missing.
    A model already in the cache is re-checked against the hub (a cheap metadata call) and not
    downloaded again. Raise :class:`ModelPullError` when ``HF_HUB_OFFLINE`` forbids downloads
    (before trying anything); otherwise failures are in the results.
    """
    models = list(models)
    endpoint = endpoint or hub_endpoint()
    if _offline_env():
        names = ", ".join(m.repo_id for m in models) or "nothing"
        raise ModelPullError(
            f"HF_HUB_OFFLINE is set, so nothing can be downloaded from {endpoint} ({names}); "
            "run `models pull` without it (the worker keeps it set for runs)"
        )
    if download is None:
        from huggingface_hub import snapshot_download

        download = snapshot_download
    results: list[PullResult] = []
    for model in models:
        try:
            path = download(
                model.repo_id,
                cache_dir=cache_dir,
                token=token,
                endpoint=endpoint,
                ignore_patterns=list(IGNORE_PATTERNS),
            )
            result = PullResult(model, str(path))
        except Exception as exc:  # each failure is reported with its model and host, then the next
            result = PullResult(model, None, _explain(model, endpoint, exc))
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _explain(model: ModelRef, endpoint: str, exc: Exception) -> str:
    """One line a person can act on: the model, the setting, the host, and what went wrong."""
    kind = type(exc).__name__
    text = " ".join(str(exc).split())[:300]
    if kind in {"GatedRepoError"}:
        hint = "the repository is gated: accept its terms on the hub and set HF_TOKEN"
    elif kind in {"RepositoryNotFoundError"}:
        hint = "no such repository (or it is private): check the id, or set HF_TOKEN"
    elif kind in {"RevisionNotFoundError"}:
        hint = "no such revision"
    elif kind in {"LocalEntryNotFoundError", "OfflineModeIsEnabled"} or "connect" in text.lower():
        hint = "the host cannot be reached from here (no network, a proxy, or DNS)"
    else:
        hint = kind
    return f"cannot download {model.repo_id} ({model.setting}) from {endpoint}: {hint} [{kind}: {text}]"


# ------------------------------------------------------------------------------------------ CLI


def pull_command(
    config: Annotated[
        str | None, typer.Option("--config", help="TOML configuration file (default: embedded).")
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="DIR",
            help="Hub cache folder to fill (default: $HF_HUB_CACHE, else $HF_HOME/hub).",
        ),
    ] = None,
    token_env: Annotated[
        str, typer.Option("--token-env", help="Environment variable holding a hub token.")
    ] = "HF_TOKEN",
) -> None:
    """Download every model the configuration names into the Hugging Face cache, for offline runs.

    Exit code 1 when any model could not be downloaded (each is named with the host tried);
    2 for a bad configuration.

    Examples:

    lookbench-live models pull --config deploy/lookbench.toml

    docker compose --profile pull run --rm models-pull
    """
    from lookbench_live.config import ConfigError, load_settings, secret

    try:
        settings = load_settings(config)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    models = configured_models(settings)
    if not models:
        typer.echo("nothing to pull: the configuration names no Hugging Face model")
        return

    def show(result: PullResult) -> None:
        if result.error is None:
            typer.echo(f"ok      {result.model.repo_id}  ({result.model.setting}) -> {result.path}")
        else:
            typer.echo(f"FAILED  {result.error}", err=True)

    try:
        results = pull_models(models, cache_dir=to, token=secret(token_env), on_result=show)
    except ModelPullError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    failed = [r for r in results if r.error]
    if failed:
        typer.echo(f"error: {len(failed)} of {len(results)} models were not downloaded", err=True)
        raise typer.Exit(1)
    typer.echo(f"{len(results)} models are in the cache; runs can stay offline (HF_HUB_OFFLINE=1)")


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group (``models pull``) to ``app``."""
    models = typer.Typer(help="Models the configuration names: pull them for offline runs.")
    models.command("pull")(pull_command)
    app.add_typer(models, name="models")
