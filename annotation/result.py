"""What an annotation run did (`AnnotationResult`, recorded in the manifest) and the error that stops one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


class AnnotationError(RuntimeError):
    """The run cannot go on (endpoint unreachable or refusing our key); what was done is stored."""


@dataclass(slots=True)
class AnnotationResult:
    """What a run did; `summary()` is what the manifest records."""

    run_id: str
    mode: Literal["vlm", "metadata_prior"]
    model: str
    taxonomy_version: str
    prompt_version: str
    images: int = 0  # kept images considered
    ok: int = 0  # rows written with status ok (grounding and attributes)
    failed: dict[str, int] = field(
        default_factory=dict
    )  # terminal failures by reason (rows in `annotations`)
    retry_later: dict[str, int] = field(default_factory=dict)  # transient, by reason (rows in `rejections`)
    skipped_existing: int = 0  # already stored, not redone: rows (VLM mode) or images (prior mode)
    deferred: int = 0  # not attempted: a cap was reached or the run stopped
    rows_written: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    prior_agreement: dict[str, int] = field(default_factory=dict)  # agree | disagree | prior_missing
    # product photos (VLM mode): "box" (the product's own item), "fills_image", or why whole image
    product_boxes: dict[str, int] = field(default_factory=dict)
    stopped_reason: str | None = None
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """True when nothing is left for a rerun to do (no deferred or transient work)."""
        return not self.deferred and not self.retry_later and self.stopped_reason is None

    def summary(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]
        data["complete"] = self.complete
        if self.mode == "metadata_prior":
            data["note"] = (
                "no VLM endpoint configured: annotations are the metadata prior (what the sources state), "
                "not a model's reading of the images"
            )
        return data
