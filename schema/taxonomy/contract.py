"""The annotation contract a taxonomy sets: the JSON Schema of one annotation, the check of a payload
against it, and the release's published columns for a labelled item.

Reached through :meth:`Taxonomy.json_schema`, :meth:`Taxonomy.validate_annotation` and
:meth:`Taxonomy.published_columns`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lookbench_live.schema.taxonomy.entries import NOT_VISIBLE, TaxonomyError, split_values

if TYPE_CHECKING:
    from lookbench_live.schema.taxonomy.model import Taxonomy


def json_schema(taxonomy: Taxonomy, category: str, *, multi: bool = False) -> dict[str, Any]:
    """A flat JSON Schema for one annotation of ``category``.

    Properties: ``category`` (fixed), one string enum per applicable group (the values that
    apply to this category, :meth:`Taxonomy.values_for`, plus :data:`NOT_VISIBLE`), and
    ``main_attribute`` (enum of :meth:`Taxonomy.category_values`). All are required, nothing else is
    allowed, and there is no ``allOf``/``anyOf``/``oneOf``/``$ref``: vLLM's grammar backend
    mis-compiles multi-branch schemas.

    With ``multi=True`` a group whose :meth:`Taxonomy.multi` is above 1 becomes an array of 1 to
    ``multi`` values of the same enum (``["not_visible"]`` when unseen); still one branch.
    ``main_attribute`` stays a single value.
    """
    cat = taxonomy.category(category)
    properties: dict[str, Any] = {"category": {"type": "string", "enum": [cat.name]}}
    for group in cat.groups:
        enum = {"type": "string", "enum": [*taxonomy.values_for(cat.name, group), NOT_VISIBLE]}
        limit = taxonomy.groups[group].multi
        if multi and limit > 1:
            properties[group] = {"type": "array", "items": enum, "minItems": 1, "maxItems": limit}
        else:
            properties[group] = enum
    properties["main_attribute"] = {"type": "string", "enum": taxonomy.category_values(cat.name)}
    return {
        "title": f"LookBench {cat.name} annotation (taxonomy {taxonomy.version})",
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def validate_annotation(taxonomy: Taxonomy, category: str, payload: Any, *, multi: bool = False) -> list[str]:
    """Every way ``payload`` breaks :func:`json_schema` or the main-attribute rule; empty if valid.

    Checked: unknown category, ``category`` key missing or different, a group missing, a
    value outside the group's vocabulary or not applicable to the category (``not_visible``
    is allowed), an extra key, and a ``main_attribute`` that is missing, ``not_visible``, or
    not one of the payload's values. With ``multi=True`` a multi-valued group may also hold
    a list (or an ``"a|b"`` string) of up to :meth:`Taxonomy.multi` distinct values; ``not_visible``
    may not be mixed with values.
    """
    if category not in taxonomy.categories:
        return [f"unknown category {category!r}; known: {', '.join(taxonomy.categories)}"]
    if not isinstance(payload, Mapping):
        return [f"payload must be a JSON object, got {type(payload).__name__}"]
    cat = taxonomy.categories[category]
    errors: list[str] = []
    if "category" not in payload:
        errors.append("missing key 'category'")
    elif payload["category"] != cat.name:
        errors.append(f"'category' is {payload['category']!r}, expected {cat.name!r}")
    given: list[str] = []
    for group in cat.groups:
        if group not in payload:
            errors.append(f"missing group {group!r}")
            continue
        values, fault = _answer_values(taxonomy, cat.name, group, payload[group], multi=multi)
        if fault:
            errors.append(fault)
        given.extend(values)
    allowed = {"category", "main_attribute", *cat.groups}
    errors.extend(f"extra key {key!r}: not a group of {cat.name!r}" for key in payload if key not in allowed)
    main = payload.get("main_attribute")
    if "main_attribute" not in payload:
        errors.append("missing key 'main_attribute'")
    elif main == NOT_VISIBLE:
        errors.append("main_attribute must be a visible value, not 'not_visible'")
    elif main not in given:
        errors.append(f"main_attribute {main!r} is not among the payload's values")
    return errors


def _answer_values(
    taxonomy: Taxonomy, category: str, group: str, value: Any, *, multi: bool
) -> tuple[list[str], str]:
    """The visible values of one group's answer and a fault ("" if none)."""
    limit = taxonomy.groups[group].multi if multi else 1
    if isinstance(value, list) and limit > 1:
        items = value
    elif isinstance(value, str):
        items = list(split_values(value)) if limit > 1 else [value]
    else:
        kind = "a string or a list of strings" if limit > 1 else "a string"
        return [], f"{group}: value must be {kind}, got {type(value).__name__}"
    if not items or not all(isinstance(v, str) for v in items):
        return [], f"{group}: {value!r} must name at least one value"
    if len(items) > limit:
        return [], f"{group}: {len(items)} values given, at most {limit} allowed"
    if len(set(items)) != len(items):
        return [], f"{group}: {value!r} repeats a value"
    if NOT_VISIBLE in items:
        return [], f"{group}: {NOT_VISIBLE!r} cannot be combined with values" if len(items) > 1 else ""
    visible: list[str] = []
    for item in items:
        if not taxonomy.in_vocabulary(group, item):
            hint = taxonomy.normalize_value(group, item)
            return [], f"{group}: {item!r} is not in the vocabulary" + (
                f" (did you mean {hint!r}?)"
                if hint
                else f" (see `lookbench-live taxonomy --schema {category}`)"
            )
        if item not in taxonomy.values_for(category, group):
            return [], f"{group}: {item!r} does not apply to {category!r} (see Taxonomy.values_for)"
        visible.append(item)
    return visible, ""


def published_columns(
    taxonomy: Taxonomy, category: str, attributes: Mapping[str, Any], main_attribute: str
) -> tuple[str, str]:
    """The release's ``(main_attribute, other_attributes)`` for one item.

    ``other_attributes`` is the visible values other than ``main_attribute``, in the category's
    group order, joined with ", "; a multi-valued group's values (a list or ``"a|b"``) are
    listed one by one. ``attributes`` maps group -> value; absent groups count as not visible,
    and the keys ``category`` and ``main_attribute`` are ignored so a validated annotation can
    be passed as is. Raise :class:`TaxonomyError` for an unknown group or value, or a
    ``main_attribute`` that is not one of the visible values. Applicability is not checked
    here: a label made under an older file is still published as it was made.
    """
    cat = taxonomy.category(category)
    unknown = [k for k in attributes if k not in cat.groups and k not in ("category", "main_attribute")]
    if unknown:
        raise TaxonomyError(f"{cat.name}: {', '.join(map(repr, unknown))} not groups of this category")
    visible: list[str] = []
    for group in cat.groups:
        raw = attributes.get(group, NOT_VISIBLE)
        parts = split_values(raw) if taxonomy.groups[group].multi > 1 else (raw,)
        for value in parts:
            if value == NOT_VISIBLE:
                continue
            if not taxonomy.in_vocabulary(group, value):
                raise TaxonomyError(f"{cat.name}: {group} value {value!r} is not in the vocabulary")
            if value not in visible:
                visible.append(value)
    if main_attribute not in visible:
        raise TaxonomyError(
            f"{cat.name}: main_attribute {main_attribute!r} is not one of the visible values {visible}"
        )
    return main_attribute, ", ".join(v for v in visible if v != main_attribute)
