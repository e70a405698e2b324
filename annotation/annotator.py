"""The VLM annotator: one schema-constrained request per image or crop, every answer validated.

`VLMAnnotator.attributes` and `VLMAnnotator.ground` each return an `Annotation` row, `ok`
or `failed` with a machine-readable `error` and the raw text; they never raise for a bad
answer. An answer that is not JSON, breaks the taxonomy (unknown value, missing group,
`main_attribute` not among the values), leaves the image with a box, or stops at
`max_tokens` (`finish_reason == "length"`, L4) is retried once with the error stated
(and, for truncation, twice the token budget), then recorded as failed:

    llm_invalid_json | llm_schema_violation | llm_box_outside_image | llm_truncated

Request failures that retrying did not cure raise `RequestFailed` (`llm_timeout`,
`llm_http_<code>`, `llm_connection`) so the run can tell terminal failures (recorded in
`annotations`) from transient ones (recorded in `rejections` and tried again next run).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from lookbench_live.annotation import prompts
from lookbench_live.annotation.endpoint import ChatEndpoint, Reply, RequestFailed
from lookbench_live.annotation.images import PreparedImage
from lookbench_live.annotation.pool import EndpointPool
from lookbench_live.annotation.prior import Prior, agreement
from lookbench_live.schema.records import Annotation, bbox_text, dumps
from lookbench_live.schema.taxonomy import MULTI_SEPARATOR, Taxonomy

MAX_RAW_CHARS = 20_000  # raw answers kept on failed rows; longer ones are cut (and say so)


@dataclass(frozen=True, slots=True)
class GroundedItem:
    category: str
    bbox: tuple[int, int, int, int]  # pixels of the original image
    ref: str | None = None


class AnswerInvalid(ValueError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def split_payload(
    taxonomy: Taxonomy, category: str, payload: dict[str, Any]
) -> tuple[dict[str, str], str | None]:
    """The attribute values and main_attribute of a validated answer.

    A multi-valued group's list (``["red", "white"]``) is stored as one string joined with
    :data:`MULTI_SEPARATOR` (``"red|white"``), in the model's order (most prominent first):
    the `annotations.attributes` map and the release's `attributes` column stay string to
    string. ``main_attribute`` is always one value.
    """
    nested = payload.get("attributes")
    source = nested if isinstance(nested, dict) else payload
    groups = taxonomy.groups_for(category)
    attributes: dict[str, str] = {}
    for group in groups:
        value = source.get(group)
        if value is None:
            continue
        if isinstance(value, list):
            attributes[group] = MULTI_SEPARATOR.join(str(v) for v in value)
        else:
            attributes[group] = str(value)
    main = payload.get("main_attribute")
    return attributes, (str(main) if main else None)


def _parse(reply: Reply) -> dict[str, Any]:
    if reply.finish_reason == "length":
        raise AnswerInvalid(
            "llm_truncated", f"the answer stopped at max_tokens after {reply.completion_tokens} tokens"
        )
    try:
        payload = json.loads(reply.text)
    except json.JSONDecodeError as exc:
        raise AnswerInvalid("llm_invalid_json", f"not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise AnswerInvalid("llm_invalid_json", f"expected a JSON object, got {type(payload).__name__}")
    return payload


def _raw(text: str) -> str:
    return text if len(text) <= MAX_RAW_CHARS else text[:MAX_RAW_CHARS] + f"…[cut, {len(text)} chars]"


class VLMAnnotator:
    """Builds requests, validates answers, and turns both into `Annotation` rows."""

    def __init__(
        self,
        endpoint: ChatEndpoint | EndpointPool,
        taxonomy: Taxonomy,
        *,
        prompt_version: str,
        max_tokens: int,
    ) -> None:
        self.endpoint = endpoint
        self.taxonomy = taxonomy
        self.prompt_version = prompt_version
        self.max_tokens = max_tokens
        self._grounding_schema = prompts.grounding_schema(taxonomy)

    def _row(self, sha256: str, bbox: str, task: str, **fields: Any) -> Annotation:
        return Annotation(
            sha256=sha256,
            bbox=bbox,
            task=task,  # type: ignore[arg-type]
            taxonomy_version=self.taxonomy.version,
            prompt_version=self.prompt_version,
            model=self.endpoint.model,
            source="vlm",
            **fields,
        )

    async def _ask(
        self,
        messages: list[dict[str, Any]],
        schema_name: str,
        schema: dict[str, Any],
        request_id: str,
        check: Any,
    ) -> tuple[Any, Reply, int, int, int]:
        """Ask, validate with `check(payload)`, retry once with the error stated.

        Returns (checked value or AnswerInvalid, last reply, attempts, prompt tokens, completion tokens).
        """
        budget = self.max_tokens
        attempts = prompt_tokens = completion_tokens = 0
        latency = 0.0
        conversation = messages
        outcome: Any = None
        reply: Reply | None = None
        for round_ in range(2):
            try:
                reply = await self.endpoint.complete(
                    conversation,
                    schema_name=schema_name,
                    schema=schema,
                    max_tokens=budget,
                    request_id=f"{request_id}|{uuid.uuid4().hex[:8]}",
                )
            except RequestFailed as exc:
                exc.attempts += attempts
                raise
            attempts += reply.attempts
            prompt_tokens += reply.prompt_tokens
            completion_tokens += reply.completion_tokens
            latency += reply.latency_ms
            try:
                outcome = check(_parse(reply))
                break
            except AnswerInvalid as invalid:
                outcome = invalid
                if round_ == 0:
                    if invalid.reason == "llm_truncated":
                        budget = budget * 2
                    conversation = prompts.correction_messages(messages, reply.text, invalid.detail)
        assert reply is not None
        reply.latency_ms = round(latency, 3)
        return outcome, reply, attempts, prompt_tokens, completion_tokens

    async def attributes(
        self,
        sha256: str,
        image: PreparedImage,
        *,
        category: str,
        bbox: tuple[int, int, int, int] | None = None,
        item_ref: str | None = None,
        prior: Prior | None = None,
        context: tuple[tuple[str, str | None], ...] = (),
    ) -> Annotation:
        """Attribute values of one image or crop of a known category."""
        box = bbox_text(bbox)
        messages = prompts.attributes_messages(self.taxonomy, category, image.data_url, context=context)
        # Colour and material may hold a short list (taxonomy `multi`): a striped two-colour
        # top or a wool-silk blend has no single right value.
        schema = self.taxonomy.json_schema(category, multi=True)
        # An open enum: the model may contradict the expected category (issue 22 §4); the
        # attribute groups stay the expected category's, so the answer is checked against them.
        names = self.taxonomy.category_names()
        schema["properties"]["category"] = {
            "type": "string",
            "enum": [category, *(c for c in names if c != category)],
        }
        answered: list[str] = []

        def check(payload: dict[str, Any]) -> dict[str, Any]:
            said = payload.get("category")
            if said in names:
                payload = {**payload, "category": category}
            errors = self.taxonomy.validate_annotation(category, payload, multi=True)
            if errors:
                raise AnswerInvalid("llm_schema_violation", "; ".join(str(e) for e in errors)[:1000])
            answered[:] = [str(said)]
            return payload

        outcome, reply, attempts, p_tok, c_tok = await self._ask(
            messages, f"attributes_{category}", schema, f"{sha256}|{box}|attributes", check
        )
        common = {
            "category": category,
            "item_ref": item_ref,
            "latency_ms": reply.latency_ms,
            "prompt_tokens": p_tok,
            "completion_tokens": c_tok,
            "attempts": attempts,
        }
        if isinstance(outcome, AnswerInvalid):
            return self._row(
                sha256,
                box,
                "attributes",
                status="failed",
                error=outcome.reason,
                error_detail=outcome.detail,
                raw_response=_raw(reply.text),
                **common,
            )
        values, main = split_payload(self.taxonomy, category, outcome)
        agreed = agreement(self.taxonomy, category, values, prior)
        if answered and answered[0] != category:
            agreed["category"] = "disagree"  # the image shows another category: audited first
        return self._row(
            sha256,
            box,
            "attributes",
            status="ok",
            main_attribute=main,
            attributes=values,
            prior_agreement=agreed,
            raw_response=reply.text,
            **common,
        )

    async def ground(
        self, sha256: str, image: PreparedImage, *, refs: dict[str, str | None] | None = None
    ) -> tuple[Annotation, list[GroundedItem]]:
        """Category and box of every visible item; boxes come back in pixels of the original image.

        `refs` maps a category to the item it must be (unique match), or to None when the
        category is ambiguous or unknown; the grounding row records the link.
        """
        messages = prompts.grounding_messages(
            self.taxonomy, image.sent_width, image.sent_height, image.data_url
        )
        categories = set(self.taxonomy.category_names())

        def check(payload: dict[str, Any]) -> list[GroundedItem]:
            items = payload.get("items")
            if not isinstance(items, list):
                raise AnswerInvalid("llm_schema_violation", "the answer has no 'items' list")
            found: list[GroundedItem] = []
            for index, item in enumerate(items):
                if not isinstance(item, dict) or item.get("category") not in categories:
                    got = item.get("category") if isinstance(item, dict) else item
                    raise AnswerInvalid(
                        "llm_schema_violation", f"items[{index}].category {got!r} is not a category"
                    )
                problem = image.box_error(item.get("bbox_2d"))
                if problem:
                    raise AnswerInvalid("llm_box_outside_image", f"items[{index}]: {problem}")
                box = image.to_original(item["bbox_2d"])
                if box[0] >= box[2] or box[1] >= box[3]:
                    raise AnswerInvalid("llm_box_outside_image", f"items[{index}]: empty box {box}")
                found.append(GroundedItem(item["category"], box))
            return link_items(found, refs or {})

        outcome, reply, attempts, p_tok, c_tok = await self._ask(
            messages, "grounding", self._grounding_schema, f"{sha256}||grounding", check
        )
        common = {
            "latency_ms": reply.latency_ms,
            "prompt_tokens": p_tok,
            "completion_tokens": c_tok,
            "attempts": attempts,
        }
        if isinstance(outcome, AnswerInvalid):
            row = self._row(
                sha256,
                "",
                "grounding",
                status="failed",
                error=outcome.reason,
                error_detail=outcome.detail,
                raw_response=_raw(reply.text),
                **common,
            )
            return row, []
        row = self._row(
            sha256,
            "",
            "grounding",
            status="ok",
            items_json=items_json(outcome),
            raw_response=reply.text,
            **common,
        )
        return row, outcome


def link_items(items: list[GroundedItem], refs: dict[str, str | None]) -> list[GroundedItem]:
    """Link each item to the one ref of its category; two items of one category stay unlinked."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.category] = counts.get(item.category, 0) + 1
    return [
        GroundedItem(i.category, i.bbox, refs.get(i.category) if counts[i.category] == 1 else None)
        for i in items
    ]


def items_json(items: list[GroundedItem]) -> str:
    return dumps([{"category": i.category, "bbox": list(i.bbox), "ref": i.ref} for i in items])


def items_from_json(text: str | None) -> list[GroundedItem]:
    """The grounded items stored on a grounding row (for a resumed run)."""
    if not text:
        return []
    return [
        GroundedItem(str(i["category"]), tuple(int(v) for v in i["bbox"]), i.get("ref"))  # type: ignore[arg-type]
        for i in json.loads(text)
    ]
