"""The typed state a run carries from step to step, and the records it keeps of its steps.

`refresh.Run` holds what the steps produce: the sites' outcomes (`stages.SiteOutcome`), the
staged release, the audit (the judge's `AuditSummary`), the gate (`Gate`), the evaluations, and
each step INSTANCE's results (`StepResults`: the two dedup and the two annotate passes keep
their own). What survives a killed run is a completion marker in the lake; its `detail` is a
typed, versioned record (`ReleaseOutcome`, `stages.SiteOutcome`) read back strictly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

# The version of the completion records below; a marker written in another shape is refused by
# name (`RecordError`), never half-read.
RECORD_VERSION = 1


class RecordError(ValueError):
    """A completion marker's detail is not the record this code writes (another version, damaged)."""


def dump_record(kind: str, payload: Mapping[str, Any]) -> str:
    """A completion detail: `{"record": kind, "v": RECORD_VERSION, **payload}` as JSON, whole."""
    return json.dumps({"record": kind, "v": RECORD_VERSION, **payload}, sort_keys=True, default=str)


def load_record(kind: str, detail: str, names: frozenset[str]) -> dict[str, Any]:
    """The payload of a completion detail written by `dump_record(kind, …)`, with exactly the
    fields `names`; `RecordError` naming what is wrong otherwise."""
    try:
        data = json.loads(detail)
    except ValueError as exc:
        raise RecordError(f"completion record {kind!r} is not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("record") != kind:
        raise RecordError(f"completion record is not a {kind!r} record: {detail[:200]!r}")
    if data.get("v") != RECORD_VERSION:
        raise RecordError(f"completion record {kind!r} has version {data.get('v')!r}, not {RECORD_VERSION}")
    payload = {k: v for k, v in data.items() if k not in ("record", "v")}
    if set(payload) != names:
        raise RecordError(f"completion record {kind!r} has fields {sorted(payload)}, not {sorted(names)}")
    return payload


# ---------------------------------------------------------------------- the gate
Check = Literal["content", "audit"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One check's say on publishing: the content check (X8) or the judge's audit."""

    check: Check
    passed: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether the release may be published as latest: the verdicts of the content check and
    the audit. The one place they are built and merged: a failed verdict keeps the gate failed,
    a later verdict of the same check replaces the earlier one (the second staging's content
    check is about what is published), and the reason names every verdict once."""

    verdicts: tuple[Verdict, ...] = ()

    @property
    def passed(self) -> bool | None:
        """False when any check failed, True when some passed and none failed, None: no verdict."""
        if not self.verdicts:
            return None
        return all(v.passed for v in self.verdicts)

    @property
    def reason(self) -> str:
        if not self.verdicts:
            return "no audit gate"
        if len(self.verdicts) == 1:
            return self._text(self.verdicts[0])
        ordered = sorted(self.verdicts, key=lambda v: v.check != "content")
        return "; ".join(self._text(v) if v.check == "content" else f"audit: {v.reason}" for v in ordered)

    @staticmethod
    def _text(verdict: Verdict) -> str:
        return f"content check: {verdict.reason}" if verdict.check == "content" else verdict.reason

    def with_verdict(self, verdict: Verdict) -> Gate:
        return Gate((*(v for v in self.verdicts if v.check != verdict.check), verdict))

    def as_json(self) -> dict[str, Any]:
        """The manifest's `gate` (`{"passed", "reason"}`), which readers of releases use."""
        return {"passed": self.passed, "reason": self.reason}


# ---------------------------------------------------------------------- step instances
@dataclass(slots=True)
class StepResults:
    """Each step instance's results, in run order, keyed by its label (`dedup real`)."""

    by_step: dict[str, list[Any]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step instance
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # `progress.stage_counts` per instance

    def add(self, label: str, *results: Any) -> None:
        self.by_step.setdefault(label, []).extend(results)

    def get(self, label: str) -> list[Any]:
        return self.by_step.get(label, [])

    def as_json(self) -> dict[str, list[Any]]:
        return {label: [plain(r) for r in results] for label, results in self.by_step.items()}


def plain(value: Any) -> Any:
    """A result as plain data (dicts, lists, scalars) for the summary the CLI prints."""
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        return {k: v for k, v in asdict(value).items() if not k.startswith("_")}
    return value


# ---------------------------------------------------------------------- the release's outcome
@dataclass(frozen=True, slots=True)
class ReleaseOutcome:
    """What the run did with its release: the summary's `release`, and its completion marker."""

    version: str
    path: str
    rows: dict[str, int]
    published_latest: bool | None  # None: committed by an earlier run
    gate: dict[str, Any] | None
    dropped: dict[str, int] = field(default_factory=dict)
    latest_reason: str = ""
    report: str | None = None
    audit: dict[str, Any] | None = None
    evaluation: list[dict[str, Any]] | None = None
    sites: list[dict[str, Any]] | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self) -> str:
        return dump_record("release", self.as_dict())

    @classmethod
    def from_record(cls, detail: str) -> ReleaseOutcome:
        return cls(**load_record("release", detail, frozenset(f.name for f in fields(cls))))
