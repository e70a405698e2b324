"""What the evidence lets a release publish: one home for the label rules (issue 22 §4).

A release row carries the annotation's labels and `label_disputes`, the groups where the VLM
disagreed with the metadata prior (`category` among them). `LabelRules` reads the judge's
current verdicts (`audits`, the highest attempt per item) and decides per row:

- category disputed (the VLM said the image shows another category than the one its
  attributes were asked for): published only when the judge confirms the row's category
  (`correct`); otherwise (not audited, `cannot_tell`, or the judge sides with another category,
  whose attribute groups were never asked) the row is held back, reason `category_disputed`.
- main attribute judged wrong (the group that holds `main_attribute`): with
  `judge.on_wrong_main_attribute = "hold_back"` the row is held back (`main_attribute_wrong`);
  with `"correct"` the judge's right values replace the wrong groups and the main attribute
  becomes the corrected group's first value; a wrong main attribute with no usable
  correction is held back all the same.
- attribute disputes are only recorded (the column); they weight the audit sample.
- evidence checks (`evidence_checks`, the newest outcome per image or box; phase B): a generated
  image or garment box the VLM sees as another (published) category than requested is held back
  (`generated_category_mismatch`); with a VLM configured, one the check has no pass or fail for
  is held back too (`generated_category_unchecked`: the next run asks again); a conditioned look
  under the embedding threshold against its product's photos is held back
  (`conditioned_look_mismatch`). Which checks ran is in the manifest (`evidence_checks`).

A held-back query takes its item's gallery in that subset with it (`query_held_back`), and a
gallery left empty takes its queries (`no_gallery`): a row of a retrieval task is never
published without its other half. Every dropped row is a `(item, reason, detail)` triple the
release records in `rejections`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow.compute as pc

from lookbench_live.schema.records import (
    CONDITIONED_LOOK_MISMATCH,
    GENERATED_CATEGORY_MISMATCH,
    GENERATED_CATEGORY_UNCHECKED,
    Audit,
    EvidenceCheck,
    evidence_outcomes,
)
from lookbench_live.schema.release import NOISE
from lookbench_live.schema.taxonomy import split_values
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.views import Window

OnWrongMain = Literal["hold_back", "correct"]


def row_key(raw_sha256: str, bbox: Any) -> tuple[str, str]:
    """A release row's audit key: the photo and the box, as `audit_staging` names its items."""
    return raw_sha256, ",".join(str(v) for v in bbox) if bbox else ""


@dataclass(slots=True)
class LabelRules:
    on_wrong_main_attribute: OnWrongMain = "hold_back"
    verdicts: Mapping[tuple[str, str], Audit] = field(default_factory=dict)
    corrected: int = 0
    # (sha256, bbox, check) -> the newest outcome; see `schema.records.evidence_outcomes`
    evidence: Mapping[tuple[str, str, str], EvidenceCheck] = field(default_factory=dict)
    # A VLM is configured and the category check is on: a generated row needs its pass.
    require_generated_category: bool = False
    # What the manifest says of the VLM check when it did not run (prior mode), else None.
    generated_category_note: str | None = None
    held: dict[str, int] = field(default_factory=dict)  # evidence reason -> rows held back
    # check -> the methods of its current outcomes over the whole lake, when `evidence` holds only
    # the window's (`from_lake(window=…)`); None: taken from `evidence`.
    methods: Mapping[str, set[str]] | None = None

    @classmethod
    def from_lake(
        cls,
        lake: Lake,
        *,
        on_wrong_main_attribute: OnWrongMain,
        judge_model: str,
        require_generated_category: bool = False,
        generated_category_note: str | None = None,
        window: Window | None = None,
    ) -> LabelRules:
        """The rules with the judge's current verdict per item (the highest attempt that is ok) and
        the evidence checks' current outcomes.

        `window`: the release's window. Every row of its release shows an image first seen in it
        (`raw_sha256`), so only those images' verdicts and outcomes are read, not the lake's
        history; the methods the manifest names come from a DuckDB aggregate over the table."""
        where = methods = None
        if window is not None and window.expression() is not None:
            shas = lake.read("images", columns=["sha256"], where=window.expression()).column("sha256")
            where = pc.field("sha256").isin(pc.unique(pc.drop_null(shas)))
            methods = _current_methods(lake)
        best: dict[tuple[str, str], Audit] = {}
        for row in lake.read("audits", where=where).to_pylist():
            record = Audit.from_row(row)
            assert isinstance(record, Audit)
            if record.judge_model != judge_model or record.status != "ok":
                continue
            key = (record.sha256, record.bbox)
            if key not in best or record.attempt > best[key].attempt:
                best[key] = record
        checks = lake.read(EvidenceCheck.__table__, where=where).to_pylist()
        return cls(
            on_wrong_main_attribute=on_wrong_main_attribute,
            verdicts=best,
            evidence=evidence_outcomes(EvidenceCheck.from_row(row) for row in checks),
            require_generated_category=require_generated_category,
            generated_category_note=generated_category_note,
            methods=methods,
        )

    def describe(self) -> str:
        """The rules as the dataset card states them."""
        main = (
            "a main attribute the judge marked wrong is replaced by the judge's correction"
            if self.on_wrong_main_attribute == "correct"
            else "a row whose main attribute the judge marked wrong is held back"
        )
        generated = (
            "a generated image the VLM sees as another category than requested is held back"
            if self.generated_category_note is None
            else "generated images were not checked for their category (no VLM configured)"
        )
        return (
            "an item whose VLM category disagrees with the metadata prior is audited first and "
            f"published only if the judge confirms it; {main}; attribute disagreements with the "
            f"prior are listed per row in `label_disputes`; {generated}; a conditioned look whose "
            "embedding is under the threshold against its product's photos is held back"
        )

    def evidence_info(self) -> dict[str, Any]:
        """The manifest's `evidence_checks` entry for the checks these rules act on."""
        methods: dict[str, set[str]] = {}
        for outcome in self.evidence.values():
            methods.setdefault(outcome.check, set()).add(outcome.method)
        if self.methods is not None:
            methods = {check: set(names) for check, names in self.methods.items()}
        category = (
            {"ran": False, "note": self.generated_category_note}
            if self.generated_category_note is not None
            else {"ran": True, "methods": sorted(methods.get("generated_category", ()))}
        )
        return {
            "generated_category": category,
            "conditioned_look": {"ran": True, "methods": sorted(methods.get("conditioned_look", ()))},
            "held_back": dict(sorted(self.held.items())),
        }

    def failed_looks(self) -> frozenset[str]:
        """Generated images (whole, no box) whose conditioned-look check failed: the assembler does
        not hold their product back for them (`Assembler.reserved_products`)."""
        return frozenset(
            sha
            for (sha, bbox, check), outcome in self.evidence.items()
            if check == "conditioned_look" and not bbox and outcome.status == "fail"
        )

    def _evidence(self, row: Mapping[str, Any]) -> str | None:
        """The evidence reason that holds a generated row back, or None."""
        if json.loads(row.get("provenance") or "{}").get("kind") != "generation":
            return None  # product photos: neither generated nor conditioned
        sha, bbox = row_key(row["raw_sha256"], row.get("bbox"))
        category = self.evidence.get((sha, bbox, "generated_category"))
        if category is not None and category.status == "fail":
            return GENERATED_CATEGORY_MISMATCH
        if self.require_generated_category and (category is None or category.status == "error"):
            return GENERATED_CATEGORY_UNCHECKED
        look = self.evidence.get((sha, bbox, "conditioned_look"))
        if look is not None and look.status == "fail":
            return CONDITIONED_LOOK_MISMATCH
        return None

    def _main_group(self, row: Mapping[str, Any]) -> str | None:
        main = row.get("main_attribute") or ""
        for kv in row.get("attributes") or []:
            if main and main in split_values(kv["value"]):
                return str(kv["key"])
        return None

    def decide(self, row: dict[str, Any]) -> str | None:
        """None to publish `row` (corrected in place where the rules say), else the reason."""
        evidence = self._evidence(row)
        if evidence is not None:
            self.held[evidence] = self.held.get(evidence, 0) + 1
            return evidence
        audit = self.verdicts.get(row_key(row["raw_sha256"], row.get("bbox")))
        verdicts = audit.verdicts if audit is not None else {}
        if "category" in (row.get("label_disputes") or []) and verdicts.get("category") != "correct":
            return "category_disputed"
        group = self._main_group(row)
        if group is None or verdicts.get(group) != "wrong":
            return None
        assert audit is not None
        if self.on_wrong_main_attribute == "hold_back" or group not in audit.corrections:
            return "main_attribute_wrong"
        attributes = {kv["key"]: kv["value"] for kv in row["attributes"]}
        for name, verdict in verdicts.items():
            if verdict == "wrong" and name in audit.corrections and name in attributes:
                attributes[name] = audit.corrections[name]
        row["attributes"] = [{"key": k, "value": v} for k, v in sorted(attributes.items())]
        row["main_attribute"] = split_values(audit.corrections[group])[0]
        self.corrected += 1
        return None

    def apply(
        self, rows: Mapping[tuple[str, str], list[dict[str, Any]]]
    ) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[tuple[str, str, str]]]:
        """The rows to publish per (subset, split), and each dropped row with its reason."""
        dropped: list[tuple[str, str, str]] = []
        kept: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for (subset, split), members in rows.items():
            if subset == NOISE:  # distractors carry no labels a user scores against
                kept[(subset, split)] = list(members)
                continue
            out = []
            for row in members:
                reason = self.decide(row)
                if reason is None:
                    out.append(row)
                else:
                    dropped.append((row["item_ID"], reason, f"{subset}/{split} {row['sha256']}"))
            kept[(subset, split)] = out
        # A task row is never published without its other half.
        for subset in {s for s, _ in rows if s != NOISE}:
            query, gallery = kept.get((subset, "query"), []), kept.get((subset, "gallery"), [])
            before_q = _items(rows.get((subset, "query"), []))
            before_g = _items(rows.get((subset, "gallery"), []))
            with_query = _items(query)
            with_gallery = _items(gallery)
            orphans = (before_q - with_query) & with_gallery
            kept[(subset, "gallery")] = _drop(gallery, orphans, "query_held_back", subset, dropped)
            bare = (before_g - _items(kept[(subset, "gallery")])) & with_query
            kept[(subset, "query")] = _drop(query, bare, "no_gallery", subset, dropped)
        return kept, dropped


# The methods of each check's current outcomes (`evidence_outcomes`: per image or box and check,
# the newest row, then the highest attempt), computed by DuckDB over the Parquet scan.
_CURRENT_METHODS = """
SELECT DISTINCT "check", method FROM (
  SELECT "check", method,
         row_number() OVER (PARTITION BY sha256, bbox, "check" ORDER BY created_at DESC, attempt DESC) AS n
  FROM evidence_checks)
WHERE n = 1
"""


def _current_methods(lake: Lake) -> dict[str, set[str]]:
    methods: dict[str, set[str]] = {}
    for row in lake.sql(_CURRENT_METHODS, [EvidenceCheck.__table__]).to_pylist():
        methods.setdefault(row["check"], set()).add(row["method"])
    return methods


def _items(rows: Iterable[Mapping[str, Any]]) -> set[str]:
    return {str(r["item_ID"]) for r in rows}


def _drop(
    rows: list[dict[str, Any]], gone: set[str], reason: str, subset: str, dropped: list[tuple[str, str, str]]
) -> list[dict[str, Any]]:
    keep = []
    for row in rows:
        if str(row["item_ID"]) in gone:
            dropped.append((row["item_ID"], reason, f"{subset} {row['sha256']}"))
        else:
            keep.append(row)
    return keep
