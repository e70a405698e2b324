"""What spiders yield: one small item type for products, looks and rejections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from lookbench_live.schema.records import utcnow

ItemKind = Literal["product", "look", "rejection"]


@dataclass(slots=True)
class CrawlItem:
    """`data` is JSON-safe: `NormalizedProduct.to_json()`, `LookData.to_json()`, or
    {"stage", "item", "reason", "detail"} for a rejection. `observed_at` is ISO 8601 UTC."""

    kind: ItemKind
    data: dict[str, Any]
    observed_at: str = field(default_factory=lambda: utcnow().isoformat())

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "data": self.data, "observed_at": self.observed_at}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> CrawlItem:
        return cls(kind=value["kind"], data=value["data"], observed_at=value["observed_at"])


def rejection(item: str, reason: str, detail: str = "", stage: str = "crawl") -> CrawlItem:
    return CrawlItem("rejection", {"stage": stage, "item": item, "reason": reason, "detail": detail[:500]})
