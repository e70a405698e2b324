"""Model specs: what `evaluation.models` and `--model` name, and where the files are.

A spec is a Hugging Face id or a local folder, optionally followed by options after `?`:
`srpone/gr-lite?dim=256&size=336`. The options change how the model embeds (input size in
pixels, embedding width), so the whole spec, options included, is the name results are
filed under: two variants of one checkpoint are two rows of the leaderboard.

A Hub id is resolved to its snapshot in the local Hugging Face cache only (the layout
`lookbench-live models pull` writes: `models--ORG--NAME/snapshots/<commit>/`); nothing is
downloaded here. A local folder in the same layout as a snapshot loads through the same code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# Options a spec may carry, with what they mean (`size`, `dim` apply to GR-Lite).
OPTIONS = {
    "size": "input size in pixels (square resize)",
    "dim": "embedding width kept (the first `dim` features)",
}
OPEN_CLIP_PREFIX = "open_clip:"  # open_clip's own names: open_clip:ARCH/TAG


class ModelSpecError(ValueError):
    """A model spec that cannot be parsed or whose files are not here; the message says which."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed spec: `source` (Hub id, folder or `open_clip:` name) and its options."""

    text: str
    source: str
    options: dict[str, int] = field(default_factory=dict)

    def option(self, key: str, default: int | None = None) -> int | None:
        return self.options.get(key, default)


def parse_model_spec(text: str) -> ModelSpec:
    """`SOURCE[?key=value&...]` -> ModelSpec; unknown keys or non-integer values are errors."""
    source, _, query = text.partition("?")
    source = source.strip()
    if not source:
        raise ModelSpecError(f"model spec {text!r} names no model")
    options: dict[str, int] = {}
    for part in filter(None, query.split("&")):
        key, sep, value = part.partition("=")
        if key not in OPTIONS or not sep:
            known = ", ".join(f"{k} ({v})" for k, v in OPTIONS.items())
            raise ModelSpecError(f"model spec {text!r}: unknown option {part!r}; known: {known}")
        try:
            number = int(value)
        except ValueError:
            raise ModelSpecError(
                f"model spec {text!r}: option {key} needs a whole number, not {value!r}"
            ) from None
        if number <= 0:
            raise ModelSpecError(f"model spec {text!r}: option {key} must be positive")
        options[key] = number
    return ModelSpec(text, source, options)


def is_local(source: str) -> bool:
    """A folder or file path rather than a Hub id (`name` or `org/name`)."""
    return source.startswith((".", "/", "~")) or source.count("/") > 1 or Path(source).exists()


def hub_repo_id(text: str) -> str | None:
    """The Hugging Face repository a spec needs pulled, or None (a local path, open_clip name)."""
    if text == "baseline" or text.startswith(("baseline:", OPEN_CLIP_PREFIX)):
        return None  # the weight-free baseline, open_clip's own names: nothing on the Hub
    try:
        source = parse_model_spec(text).source
    except ModelSpecError:
        return None  # reported when the model is loaded; pulling cannot help
    return None if is_local(source) else source


def resolve_folder(source: str) -> Path:
    """The folder holding a model's files: the path itself (a folder, or a `.pt` file), or the
    Hub id's cached snapshot.

    Raises ModelSpecError (one line) when a Hub id is not in the cache: runs are offline, so
    the remedy is `lookbench-live models pull`.
    """
    path = Path(os.path.expanduser(source))
    if path.exists():
        return path
    if is_local(source):
        raise ModelSpecError(f"model folder {source!r} does not exist")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source, local_files_only=True))
    except Exception as exc:
        raise ModelSpecError(
            f"model {source!r} is not in the Hugging Face cache ({type(exc).__name__}); "
            "run `lookbench-live models pull` where the hub is reachable"
        ) from exc
