"""Whether a JSON Schema fits OpenAI's strict structured outputs (``"strict": true``).

OpenAI compiles a strict schema into a decoding constraint and refuses (HTTP 400) a schema
outside its subset. The rules checked here are the documented ones ("Supported schemas" of
the Structured Outputs guide) and the limits its 400 messages quote:

- the root is an object, not ``anyOf``;
- every object lists ``properties``, has ``additionalProperties: false`` and names every
  property in ``required`` (optional fields are nullable, never omitted);
- only these keywords: ``type``, ``enum``, ``const``, ``title``, ``description``,
  ``properties``, ``required``, ``additionalProperties``, ``items``, ``anyOf``, ``$ref``,
  ``$defs``, string ``pattern``/``format``, number ``minimum``/``maximum``/
  ``exclusiveMinimum``/``exclusiveMaximum``/``multipleOf``, array ``minItems``/``maxItems``
  (``uniqueItems``, ``minLength``, ``allOf``, ``oneOf``… are refused);
- at most 5,000 object properties, 10 levels of nesting, 500 enum values in all (the
  limit an API 400 quoted; the guide now says 1,000: the stricter one is kept), and for an
  enum of more than 250 values at most 15,000 characters in it.

vLLM's guided decoding accepts more; a schema that passes here is the common subset both
serve, which is what the annotation and judge schemas are held to (tests/annotation/test_multi_value.py).
"""

from __future__ import annotations

from typing import Any

__all__ = ["openai_strict_problems"]

_COMMON = {"type", "enum", "const", "title", "description", "anyOf", "$ref", "$defs"}
_BY_TYPE = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems"},
    "string": {"pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "boolean": set(),
    "null": set(),
}
MAX_PROPERTIES = 5000
MAX_DEPTH = 10
MAX_ENUM_VALUES = 500
LONG_ENUM = 250
LONG_ENUM_CHARS = 15_000


def openai_strict_problems(schema: Any) -> list[str]:
    """Every way ``schema`` breaks OpenAI's strict-mode subset; empty if it fits."""
    problems: list[str] = []
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        problems.append("the root must be an object schema, not anyOf")
    totals = {"properties": 0, "enum": 0}
    _walk(schema, "$", 0, problems, totals)
    if totals["properties"] > MAX_PROPERTIES:
        problems.append(f"{totals['properties']} object properties, at most {MAX_PROPERTIES}")
    if totals["enum"] > MAX_ENUM_VALUES:
        problems.append(f"{totals['enum']} enum values in all, at most {MAX_ENUM_VALUES}")
    return problems


def _walk(node: Any, path: str, depth: int, problems: list[str], totals: dict[str, int]) -> None:
    if not isinstance(node, dict):
        problems.append(f"{path}: a schema must be an object")
        return
    if depth > MAX_DEPTH:
        problems.append(f"{path}: nested deeper than {MAX_DEPTH} levels")
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    allowed = set(_COMMON)
    for kind in kinds:
        if kind not in _BY_TYPE:
            problems.append(f"{path}: unknown type {kind!r}")
            continue
        allowed |= _BY_TYPE[kind]
    for key in node:
        if key not in allowed:
            problems.append(f"{path}: keyword {key!r} is not supported in strict mode")
    enum = node.get("enum")
    if enum is not None:
        totals["enum"] += len(enum)
        if len(enum) > LONG_ENUM and sum(len(str(v)) for v in enum) > LONG_ENUM_CHARS:
            problems.append(f"{path}: an enum of {len(enum)} values over {LONG_ENUM_CHARS} characters")
    if "object" in kinds:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            problems.append(f"{path}: an object must list its properties")
            properties = {}
        if node.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties must be false")
        missing = [name for name in properties if name not in (node.get("required") or [])]
        if missing:
            problems.append(f"{path}: every property must be required; not: {', '.join(missing)}")
        totals["properties"] += len(properties)
        for name, sub in properties.items():
            _walk(sub, f"{path}.{name}", depth + 1, problems, totals)
    if "array" in kinds and "items" in node:
        _walk(node["items"], f"{path}[]", depth + 1, problems, totals)
    for index, sub in enumerate(node.get("anyOf") or []):
        _walk(sub, f"{path}.anyOf[{index}]", depth + 1, problems, totals)
    for name, sub in (node.get("$defs") or {}).items():
        _walk(sub, f"{path}.$defs.{name}", depth + 1, problems, totals)
