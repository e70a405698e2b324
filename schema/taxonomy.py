"""The LookBench fashion taxonomy: versioned closed vocabularies, kept as data in ``taxonomy.json``.

A taxonomy has categories (``dress``, ``sneakers``, ``bag``...), attribute groups (``neckline``,
``color``, ``material``...) whose values form closed vocabularies with synonyms, and for each
category the ordered list of groups that apply to it. Every group also accepts
:data:`NOT_VISIBLE`, which is not a vocabulary value.

What callers may rely on:

- Value and category names are the exact strings that appear in published releases
  (``category``, ``main_attribute``, ``other_attributes``); they never contain a comma.
- Within one category a word (value or synonym, after normalisation) names exactly one value
  of one group, so :meth:`Taxonomy.find_values` and :meth:`Taxonomy.group_of` are unambiguous.
- :meth:`Taxonomy.json_schema` is flat (no ``allOf``/``anyOf``/``oneOf``/``$ref``).
- A malformed file fails :func:`load_taxonomy` with :class:`TaxonomyError` naming the file,
  the entry and the fault; nothing half-loaded is returned.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "MULTI_SEPARATOR",
    "NOT_VISIBLE",
    "AttributeGroup",
    "AttributeValue",
    "Category",
    "Source",
    "Taxonomy",
    "TaxonomyError",
    "default_taxonomy",
    "load_taxonomy",
    "split_values",
    "values_match",
]

NOT_VISIBLE = "not_visible"
PACKAGED_FILE = "taxonomy.json"

# CalVer YYYY.M.N (see docs/taxonomy.md for when each part moves).
_VERSION_RE = re.compile(r"^(\d{4})\.(\d{1,2})\.(\d+)$")
_GROUP_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_NON_ALNUM_RE = re.compile(r"[^0-9a-z]+")
# Keys of the annotation payload that are not groups; a group may not take these names.
_RESERVED_KEYS = frozenset({"category", "main_attribute", "other_attributes", NOT_VISIBLE})
_TOP_KEYS = frozenset(
    {"title", "description", "version", "super_categories", "body_regions", "sources", "groups", "categories"}
)
_SOURCE_KEYS = frozenset({"id", "title", "file", "origin", "licence"})
_GROUP_KEYS = frozenset({"name", "sources", "values", "multi"})
_VALUE_KEYS = frozenset({"name", "synonyms", "applies", "not_for"})
_CATEGORY_KEYS = frozenset(
    {"name", "super_category", "body_region", "published", "groups", "synonyms", "sources"}
)
# Joins the values of a multi-valued group in a flat string column ("red|white").
MULTI_SEPARATOR = "|"
# A group may hold at most this many values per item: more is a list of everything, not a label.
_MAX_MULTI = 3


class TaxonomyError(ValueError):
    """A taxonomy file is malformed, or a caller named a category or group it does not have."""


@dataclass(frozen=True, slots=True)
class AttributeValue:
    """One value of a closed vocabulary; ``name`` is the published string.

    ``applies`` (only these categories) or ``not_for`` (all but these) restricts the value to
    some of the categories its group applies to: ``below-the-knee`` is a length of a dress, not
    of a t-shirt. Both empty: the value applies wherever its group does.
    """

    name: str
    synonyms: tuple[str, ...]
    applies: tuple[str, ...] = ()
    not_for: tuple[str, ...] = ()

    def applies_to(self, category: str) -> bool:
        if self.applies:
            return category in self.applies
        return category not in self.not_for


@dataclass(frozen=True, slots=True)
class AttributeGroup:
    """An attribute group (``neckline``, ``color``...): its values in file order and its source ids.

    ``multi`` is how many values one item may hold in this group (1 for most; 2 for colour and
    material, where one value is wrong by nature: a striped two-colour top, a wool-silk blend).
    """

    name: str
    values: tuple[AttributeValue, ...]
    sources: tuple[str, ...]
    multi: int = 1


@dataclass(frozen=True, slots=True)
class Category:
    """A garment category; ``groups`` is ordered, and that order is the order of ``other_attributes``.

    ``published`` is the name the release's ``category`` column carries (LookBench's language):
    the shoe categories publish as ``shoe``, backpack, clutch and wallet as ``bag``; most
    categories publish under their own name. ``body_region`` is where on a standing person the
    item is worn or held (one of the file's ``body_regions``, ordered head to feet; "" when the
    file declares none).
    """

    name: str
    super_category: str
    groups: tuple[str, ...]
    synonyms: tuple[str, ...]
    sources: tuple[str, ...]
    published: str = ""
    body_region: str = ""

    @property
    def published_name(self) -> str:
        return self.published or self.name


def split_values(value: str | Iterable[str]) -> tuple[str, ...]:
    """The values of one group's answer: ``"red|white"`` -> ``("red", "white")``; a list as is.

    Single values come back as a 1-tuple, so callers treat single- and multi-valued groups alike.
    """
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(MULTI_SEPARATOR) if part.strip())
    return tuple(str(v) for v in value)


def values_match(a: str | Iterable[str], b: str | Iterable[str]) -> bool:
    """The metric rule for one group: two answers match when their value sets intersect.

    ``"red|white"`` matches ``"white"`` and ``"white|navy"``; :data:`NOT_VISIBLE` matches nothing,
    not even itself (an unseen group is no evidence of similarity).
    """
    left = set(split_values(a)) - {NOT_VISIBLE}
    right = set(split_values(b)) - {NOT_VISIBLE}
    return bool(left & right)


@dataclass(frozen=True, slots=True)
class Source:
    """A published ontology the taxonomy draws on, with its licence as stated in the file header."""

    id: str
    title: str
    licence: str
    file: str = ""
    origin: str = ""


def _key(text: str) -> str:
    """Case-, accent-, space- and punctuation-insensitive form: ``"V-Neck"`` -> ``"v neck"``."""
    plain = text.casefold()
    if not plain.isascii():  # accents only exist outside ASCII; the common case skips this
        plain = "".join(ch for ch in unicodedata.normalize("NFKD", plain) if not unicodedata.combining(ch))
    return " ".join(_NON_ALNUM_RE.sub(" ", plain).split())


def _lookup(index: Mapping[str, Any], key: str) -> Any:
    """``index[key]``, else the singular of a plural key ("short sleeves", "dresses"), else None."""
    hit = index.get(key)
    if hit is None and key.endswith("s"):
        hit = index.get(key[:-1])
        if hit is None and key.endswith("es"):
            hit = index.get(key[:-2])
    return hit


class Taxonomy:
    """A validated taxonomy. Build it with :func:`load_taxonomy` or :meth:`from_dict`.

    ``categories`` and ``groups`` keep file order. Treat instances as read-only: the
    lookup indexes are built once, from the content at load time.
    """

    version: str
    categories: dict[str, Category]
    groups: dict[str, AttributeGroup]
    sources: dict[str, Source]
    super_categories: tuple[str, ...]
    body_regions: tuple[str, ...]
    origin: str

    def __init__(
        self,
        *,
        version: str,
        categories: dict[str, Category],
        groups: dict[str, AttributeGroup],
        sources: dict[str, Source],
        super_categories: tuple[str, ...],
        fingerprint: str,
        origin: str,
        body_regions: tuple[str, ...] = (),
    ) -> None:
        self.version = version
        self.body_regions = body_regions
        self.categories = categories
        self.groups = groups
        self.sources = sources
        self.super_categories = super_categories
        self.origin = origin
        self._fingerprint = fingerprint
        self._value_names = {g.name: frozenset(v.name for v in g.values) for g in groups.values()}
        self._value_terms: dict[str, dict[str, str]] = {}
        for group in groups.values():
            terms = self._value_terms[group.name] = {}
            for value in group.values:
                for term in (value.name, *value.synonyms):
                    terms[_key(term)] = value.name
        self._category_terms: dict[str, str] = {}
        for category in categories.values():
            for term in (category.name, *category.synonyms):
                self._category_terms[_key(term)] = category.name
        # (category, group) -> the values that apply, in file order: the one answer to "which
        # values may this category take" that prompts, schemas, validation and the prior share.
        self._applicable: dict[tuple[str, str], tuple[str, ...]] = {
            (category.name, group): tuple(v.name for v in groups[group].values if v.applies_to(category.name))
            for category in categories.values()
            for group in category.groups
        }
        # Per category: word -> (group, value); unique by construction (checked in from_dict).
        self._scan_terms: dict[str, dict[str, tuple[str, str]]] = {}
        self._scan_width: dict[str, int] = {}
        for category in categories.values():
            scan = {
                term: (group, value)
                for group in category.groups
                for term, value in self._value_terms[group].items()
                if value in self._applicable[(category.name, group)]
            }
            self._scan_terms[category.name] = scan
            self._scan_width[category.name] = max((len(t.split()) for t in scan), default=1)

    def __repr__(self) -> str:
        return (
            f"Taxonomy(version={self.version!r}, categories={len(self.categories)}, "
            f"groups={len(self.groups)}, values={sum(len(g.values) for g in self.groups.values())}, "
            f"origin={self.origin!r})"
        )

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, *, origin: str = "<taxonomy>") -> Taxonomy:
        """Validate parsed taxonomy JSON and build a Taxonomy; raise :class:`TaxonomyError` on any fault.

        ``origin`` (usually the file path) starts every error message.
        """
        return _Parser(origin).parse(data)

    # -- lookups ---------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """sha256 (hex) of the canonical JSON of the file content; differs whenever the content does."""
        return self._fingerprint

    def category_names(self) -> list[str]:
        """Category names in file order."""
        return list(self.categories)

    def groups_for(self, category: str) -> list[str]:
        """The groups that apply to ``category``, in the category's order."""
        return list(self._category(category).groups)

    def values(self, group: str) -> list[str]:
        """The vocabulary of ``group`` in file order (without :data:`NOT_VISIBLE`)."""
        return [v.name for v in self._group(group).values]

    def values_for(self, category: str, group: str) -> list[str]:
        """The values of ``group`` that apply to ``category``, in file order (without :data:`NOT_VISIBLE`).

        This is the vocabulary for one group of one category everywhere: AIGen prompts, the
        annotation JSON Schema, :meth:`validate_annotation` and the metadata prior. Raise
        :class:`TaxonomyError` if the group does not apply to the category at all.
        """
        cat = self._category(category)
        self._group(group)
        if group not in cat.groups:
            raise TaxonomyError(
                f"group {group!r} does not apply to {cat.name!r}; its groups: {', '.join(cat.groups)}"
            )
        return list(self._applicable[(cat.name, group)])

    def value_applies(self, category: str, group: str, value: str) -> bool:
        """Whether ``value`` is a value of ``group`` that ``category`` may take (False for unknown names)."""
        if category not in self.categories or group not in self.categories[category].groups:
            return False
        return value in self._applicable[(category, group)]

    def category_values(self, category: str) -> list[str]:
        """Every applicable value of every group of ``category``, in group order: the ``main_attribute`` vocabulary."""
        cat = self._category(category)
        return [value for group in cat.groups for value in self._applicable[(cat.name, group)]]

    def multi(self, group: str) -> int:
        """How many values one item may hold in ``group`` (1: a single value)."""
        return self._group(group).multi

    def body_region(self, category: str) -> str:
        """Where ``category`` is worn or held (``"head"``, ``"feet"``…); "" if the file names none."""
        return self._category(category).body_region

    def body_rank(self, category: str | None) -> int:
        """Position of the category's body region from head (0) to feet; unknown or no region: the middle.

        Orders the items of a standing person top to bottom (the prior's street-scene layout).
        """
        region = self.categories[category].body_region if category in self.categories else ""
        if region in self.body_regions:
            return self.body_regions.index(region)
        return len(self.body_regions) // 2

    # -- the published benchmark's language ------------------------------------------------------

    def published_category(self, category: str) -> str:
        """The release's ``category`` string for ``category``: ``sneakers`` -> ``shoe``, ``dress`` -> ``dress``."""
        return self._category(category).published_name

    def published_categories(self) -> list[str]:
        """Every distinct published category name, in file order."""
        return list(dict.fromkeys(cat.published_name for cat in self.categories.values()))

    def categories_published_as(self, name: str) -> list[str]:
        """Our categories that publish as ``name`` (``"shoe"`` -> the seven shoe categories); [] if none."""
        return [cat.name for cat in self.categories.values() if cat.published_name == name]

    def group_of(self, value: str, category: str | None = None) -> str | None:
        """The group whose vocabulary has the exact value name ``value`` (synonyms are not resolved).

        With ``category``, only that category's groups are searched and the answer is unique.
        Without it, the first group in file order wins (the shipped file has no value in two groups).
        None for :data:`NOT_VISIBLE` and unknown values.
        """
        candidates = self._category(category).groups if category is not None else tuple(self.groups)
        for group in candidates:
            if value in self._value_names[group]:
                return group
        return None

    def normalize_category(self, text: str) -> str | None:
        """The category named by ``text`` (its name or a synonym, ignoring case, spacing, punctuation,
        accents and a plural ``s``/``es``), or None. The text must be the whole name: "black dress" is None."""
        return _lookup(self._category_terms, _key(text))

    def normalize_value(self, group: str, text: str) -> str | None:
        """The value of ``group`` named by ``text`` (value or synonym, matched like
        :meth:`normalize_category`), :data:`NOT_VISIBLE` for "not visible", else None."""
        terms = self._value_terms[self._group(group).name]
        key = _key(text)
        if key == _key(NOT_VISIBLE):
            return NOT_VISIBLE
        return _lookup(terms, key)

    def find_values(self, category: str, text: str) -> dict[str, str]:
        """Scan free text (title, description, tags) for values of ``category``'s groups.

        Words match whole (a term never matches inside a longer word), case- and
        punctuation-insensitively, plurals included. Overlapping matches are resolved longest
        first ("faux leather" beats "leather"), then leftmost. When a group matches more than
        once, the longest, then leftmost, match gives its value. Returns ``{group: value}`` in
        the category's group order; groups with no match are absent.
        """
        terms = self._scan_terms[self._category(category).name]
        width = self._scan_width[category]  # longest term in words: bounds the scan window
        words = _key(text).split()
        matches: list[tuple[int, int, str, str]] = []
        for start in range(len(words)):
            for length in range(min(width, len(words) - start), 0, -1):
                hit = _lookup(terms, " ".join(words[start : start + length]))
                if hit is not None:
                    group, value = hit
                    matches.append((length, start, group, value))
        matches.sort(key=lambda m: (-m[0], m[1]))
        taken = [False] * len(words)
        found: dict[str, str] = {}
        for length, start, group, value in matches:
            if any(taken[start : start + length]):
                continue
            taken[start : start + length] = [True] * length
            found.setdefault(group, value)
        return {group: found[group] for group in self.categories[category].groups if group in found}

    # -- annotation contract --------------------------------------------------------------------

    def json_schema(self, category: str, *, multi: bool = False) -> dict[str, Any]:
        """A flat JSON Schema for one annotation of ``category``.

        Properties: ``category`` (fixed), one string enum per applicable group (the values that
        apply to this category, :meth:`values_for`, plus :data:`NOT_VISIBLE`), and
        ``main_attribute`` (enum of :meth:`category_values`). All are required, nothing else is
        allowed, and there is no ``allOf``/``anyOf``/``oneOf``/``$ref``: vLLM's grammar backend
        mis-compiles multi-branch schemas.

        With ``multi=True`` a group whose :meth:`multi` is above 1 becomes an array of 1 to
        ``multi`` values of the same enum (``["not_visible"]`` when unseen); still one branch.
        ``main_attribute`` stays a single value.
        """
        cat = self._category(category)
        properties: dict[str, Any] = {"category": {"type": "string", "enum": [cat.name]}}
        for group in cat.groups:
            enum = {"type": "string", "enum": [*self._applicable[(cat.name, group)], NOT_VISIBLE]}
            limit = self.groups[group].multi
            if multi and limit > 1:
                properties[group] = {"type": "array", "items": enum, "minItems": 1, "maxItems": limit}
            else:
                properties[group] = enum
        properties["main_attribute"] = {"type": "string", "enum": self.category_values(cat.name)}
        return {
            "title": f"LookBench {cat.name} annotation (taxonomy {self.version})",
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }

    def validate_annotation(self, category: str, payload: Any, *, multi: bool = False) -> list[str]:
        """Every way ``payload`` breaks :meth:`json_schema` or the main-attribute rule; empty if valid.

        Checked: unknown category, ``category`` key missing or different, a group missing, a
        value outside the group's vocabulary or not applicable to the category (``not_visible``
        is allowed), an extra key, and a ``main_attribute`` that is missing, ``not_visible``, or
        not one of the payload's values. With ``multi=True`` a multi-valued group may also hold
        a list (or an ``"a|b"`` string) of up to :meth:`multi` distinct values; ``not_visible``
        may not be mixed with values.
        """
        if category not in self.categories:
            return [f"unknown category {category!r}; known: {', '.join(self.categories)}"]
        if not isinstance(payload, Mapping):
            return [f"payload must be a JSON object, got {type(payload).__name__}"]
        cat = self.categories[category]
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
            values, fault = self._answer_values(cat.name, group, payload[group], multi=multi)
            if fault:
                errors.append(fault)
            given.extend(values)
        allowed = {"category", "main_attribute", *cat.groups}
        errors.extend(
            f"extra key {key!r}: not a group of {cat.name!r}" for key in payload if key not in allowed
        )
        main = payload.get("main_attribute")
        if "main_attribute" not in payload:
            errors.append("missing key 'main_attribute'")
        elif main == NOT_VISIBLE:
            errors.append("main_attribute must be a visible value, not 'not_visible'")
        elif main not in given:
            errors.append(f"main_attribute {main!r} is not among the payload's values")
        return errors

    def _answer_values(self, category: str, group: str, value: Any, *, multi: bool) -> tuple[list[str], str]:
        """The visible values of one group's answer and a fault ("" if none)."""
        limit = self.groups[group].multi if multi else 1
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
            if item not in self._value_names[group]:
                hint = self.normalize_value(group, item)
                return [], f"{group}: {item!r} is not in the vocabulary" + (
                    f" (did you mean {hint!r}?)"
                    if hint
                    else f" (see `lookbench-live taxonomy --schema {category}`)"
                )
            if item not in self._applicable[(category, group)]:
                return [], f"{group}: {item!r} does not apply to {category!r} (see Taxonomy.values_for)"
            visible.append(item)
        return visible, ""

    def published_columns(
        self, category: str, attributes: Mapping[str, Any], main_attribute: str
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
        cat = self._category(category)
        unknown = [k for k in attributes if k not in cat.groups and k not in ("category", "main_attribute")]
        if unknown:
            raise TaxonomyError(f"{cat.name}: {', '.join(map(repr, unknown))} not groups of this category")
        visible: list[str] = []
        for group in cat.groups:
            raw = attributes.get(group, NOT_VISIBLE)
            parts = split_values(raw) if self.groups[group].multi > 1 else (raw,)
            for value in parts:
                if value == NOT_VISIBLE:
                    continue
                if value not in self._value_names[group]:
                    raise TaxonomyError(f"{cat.name}: {group} value {value!r} is not in the vocabulary")
                if value not in visible:
                    visible.append(value)
        if main_attribute not in visible:
            raise TaxonomyError(
                f"{cat.name}: main_attribute {main_attribute!r} is not one of the visible values {visible}"
            )
        return main_attribute, ", ".join(v for v in visible if v != main_attribute)

    def to_json(self) -> dict[str, Any]:
        """The compact form: version, categories, group -> values, category -> groups, value
        restrictions, published names and multi-valued groups."""
        return {
            "version": self.version,
            "categories": self.category_names(),
            "groups": {name: self.values(name) for name in self.groups},
            "applies": {name: list(cat.groups) for name, cat in self.categories.items()},
            "values_for": {
                name: {group: list(self._applicable[(name, group)]) for group in cat.groups}
                for name, cat in self.categories.items()
            },
            "published": {name: cat.published_name for name, cat in self.categories.items()},
            "multi": {name: group.multi for name, group in self.groups.items() if group.multi > 1},
        }

    # -- helpers -----------------------------------------------------------------------------

    def _category(self, name: str) -> Category:
        try:
            return self.categories[name]
        except KeyError:
            raise TaxonomyError(
                f"unknown category {name!r} in taxonomy {self.version}; known: {', '.join(self.categories)}"
            ) from None

    def _group(self, name: str) -> AttributeGroup:
        try:
            return self.groups[name]
        except KeyError:
            raise TaxonomyError(
                f"unknown attribute group {name!r} in taxonomy {self.version}; known: {', '.join(self.groups)}"
            ) from None


class _Parser:
    """Validates parsed JSON into a Taxonomy; every fault names ``origin``, the entry and the fault."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, entry: str, fault: str) -> TaxonomyError:
        return TaxonomyError(f"{self.origin}: {entry}: {fault}")

    def parse(self, data: Any) -> Taxonomy:
        if not isinstance(data, dict):
            raise self.fail("top level", f"must be a JSON object, got {type(data).__name__}")
        self.check_keys("top level", data, _TOP_KEYS, required=("version", "groups", "categories"))
        version = self.parse_version(data["version"])
        supers = tuple(self.strings("super_categories", data.get("super_categories", []), allow_empty=True))
        regions = tuple(self.strings("body_regions", data.get("body_regions", []), allow_empty=True))
        if len(set(regions)) != len(regions):
            raise self.fail("body_regions", "lists a region twice")
        sources = self.parse_sources(data.get("sources", []))
        groups = self.parse_groups(data["groups"], sources)
        categories = self.parse_categories(data["categories"], groups, sources, supers, regions)
        self.check_every_group_applied(groups, categories)
        self.check_value_restrictions(groups, categories)
        self.check_category_words(groups, categories)
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return Taxonomy(
            version=version,
            categories=categories,
            groups=groups,
            sources=sources,
            super_categories=supers,
            fingerprint=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
            origin=self.origin,
            body_regions=regions,
        )

    def check_keys(self, entry: str, obj: Any, allowed: frozenset[str], required: Iterable[str]) -> None:
        if not isinstance(obj, dict):
            raise self.fail(entry, f"must be a JSON object, got {type(obj).__name__}")
        for key in required:
            if key not in obj:
                raise self.fail(entry, f"missing required field {key!r}")
        # Unknown keys are refused because a typo ("synonym") would otherwise drop data silently.
        extra = sorted(set(obj) - allowed)
        if extra:
            raise self.fail(entry, f"unknown field(s) {extra}; allowed: {sorted(allowed)}")

    def strings(self, entry: str, items: Any, *, allow_empty: bool = False) -> list[str]:
        if not isinstance(items, list) or not all(isinstance(s, str) and s.strip() for s in items):
            raise self.fail(entry, "must be a list of non-empty strings")
        if not items and not allow_empty:
            raise self.fail(entry, "must not be empty")
        return items

    def parse_version(self, version: Any) -> str:
        match = _VERSION_RE.match(version) if isinstance(version, str) else None
        if match is None or not 1 <= int(match.group(2)) <= 12:
            raise self.fail("version", f"{version!r} is not a YYYY.M.N version such as '2026.11.0'")
        return version

    def parse_sources(self, items: Any) -> dict[str, Source]:
        if not isinstance(items, list):
            raise self.fail("sources", "must be a list of objects")
        sources: dict[str, Source] = {}
        for i, item in enumerate(items):
            self.check_keys(f"sources[{i}]", item, _SOURCE_KEYS, required=("id", "title", "licence"))
            for field in _SOURCE_KEYS & set(item):
                if not isinstance(item[field], str) or not item[field].strip():
                    raise self.fail(f"sources[{i}]", f"field {field!r} must be a non-empty string")
            if item["id"] in sources:
                raise self.fail(f"source {item['id']!r}", "listed twice")
            sources[item["id"]] = Source(**item)
        return sources

    def source_ids(self, entry: str, items: Any, sources: Mapping[str, Source]) -> tuple[str, ...]:
        ids = self.strings(f"{entry} sources", items)
        for source in ids:
            if source not in sources:
                raise self.fail(entry, f"source {source!r} is not in the header's sources {sorted(sources)}")
        return tuple(ids)

    def check_name(self, entry: str, name: Any) -> str:
        if not isinstance(name, str) or not _key(name):
            raise self.fail(entry, f"name {name!r} must be a non-empty string")
        # Names are published verbatim and joined with ", " in other_attributes.
        # "|" joins the values of a multi-valued group ("red|white").
        if (
            name != name.strip().lower()
            or any(c in name for c in (",", "_", MULTI_SEPARATOR))
            or "  " in name
        ):
            raise self.fail(
                entry,
                f"name {name!r} must be lowercase words without commas, underscores, '|' or double spaces",
            )
        if _key(name) == _key(NOT_VISIBLE):
            raise self.fail(entry, f"{NOT_VISIBLE!r} is reserved; every group accepts it implicitly")
        return name

    def parse_groups(self, items: Any, sources: Mapping[str, Source]) -> dict[str, AttributeGroup]:
        if not isinstance(items, list) or not items:
            raise self.fail("groups", "must be a non-empty list")
        groups: dict[str, AttributeGroup] = {}
        for i, item in enumerate(items):
            self.check_keys(f"groups[{i}]", item, _GROUP_KEYS, required=("name", "values", "sources"))
            name = item["name"]
            if not isinstance(name, str) or not _GROUP_NAME_RE.match(name) or name in _RESERVED_KEYS:
                raise self.fail(
                    f"groups[{i}]",
                    f"group name {name!r} must be snake_case and not one of {sorted(_RESERVED_KEYS)}",
                )
            entry = f"group {name!r}"
            if name in groups:
                raise self.fail(entry, "defined twice")
            group_sources = self.source_ids(entry, item["sources"], sources)
            multi = item.get("multi", 1)
            if type(multi) is not int or not 1 <= multi <= _MAX_MULTI:
                raise self.fail(entry, f"multi {multi!r} must be an integer from 1 to {_MAX_MULTI}")
            if not isinstance(item["values"], list) or not item["values"]:
                raise self.fail(entry, "values must be a non-empty list")
            seen: dict[str, tuple[str, str]] = {}  # normalised word -> (value, word as written)
            values = []
            for j, raw in enumerate(item["values"]):
                self.check_keys(f"{entry} values[{j}]", raw, _VALUE_KEYS, required=("name",))
                value = self.check_name(f"{entry} values[{j}]", raw["name"])
                synonyms = self.strings(
                    f"{entry} value {value!r} synonyms", raw.get("synonyms", []), allow_empty=True
                )
                for word in (value, *synonyms):
                    key = _key(word)
                    if not key:
                        raise self.fail(
                            f"{entry} value {value!r}", f"synonym {word!r} has no letters or digits"
                        )
                    if key in seen:
                        other_value, other_word = seen[key]
                        raise self.fail(
                            f"{entry} value {value!r}",
                            f"{word!r} duplicates {other_word!r} of value {other_value!r} (both read {key!r}); "
                            "within a group each word may appear once",
                        )
                    seen[key] = (value, word)
                if "applies" in raw and "not_for" in raw:
                    raise self.fail(f"{entry} value {value!r}", "give 'applies' or 'not_for', not both")
                applies = self.strings(
                    f"{entry} value {value!r} applies", raw.get("applies", []), allow_empty=True
                )
                not_for = self.strings(
                    f"{entry} value {value!r} not_for", raw.get("not_for", []), allow_empty=True
                )
                if "applies" in raw and not applies:
                    raise self.fail(
                        f"{entry} value {value!r}", "'applies' is empty: the value would apply nowhere"
                    )
                values.append(AttributeValue(value, tuple(synonyms), tuple(applies), tuple(not_for)))
            groups[name] = AttributeGroup(name, tuple(values), group_sources, multi)
        return groups

    def parse_categories(
        self,
        items: Any,
        groups: Mapping[str, AttributeGroup],
        sources: Mapping[str, Source],
        supers: tuple[str, ...],
        regions: tuple[str, ...] = (),
    ) -> dict[str, Category]:
        if not isinstance(items, list) or not items:
            raise self.fail("categories", "must be a non-empty list")
        categories: dict[str, Category] = {}
        owner: dict[str, str] = {}  # word -> category it names
        for i, item in enumerate(items):
            self.check_keys(
                f"categories[{i}]",
                item,
                _CATEGORY_KEYS,
                required=("name", "super_category", "groups", "sources"),
            )
            name = self.check_name(f"categories[{i}]", item["name"])
            entry = f"category {name!r}"
            if name in categories:
                raise self.fail(entry, "defined twice")
            if not isinstance(item["super_category"], str) or (
                supers and item["super_category"] not in supers
            ):
                raise self.fail(
                    entry, f"super_category {item['super_category']!r} is not one of {list(supers)}"
                )
            # Declared regions bind every category to one (the layout prior and the product-box
            # match need it for all of them); a file without regions has none.
            region = item.get("body_region", "")
            if regions and region not in regions:
                raise self.fail(entry, f"body_region {region!r} is not one of {list(regions)}")
            if not regions and "body_region" in item:
                raise self.fail(entry, "body_region given but the file declares no body_regions")
            applied = self.strings(f"{entry} groups", item["groups"])
            for group in applied:
                if group not in groups:
                    raise self.fail(
                        entry, f"names unknown group {group!r}; defined groups: {', '.join(groups)}"
                    )
            if len(set(applied)) != len(applied):
                raise self.fail(entry, "lists a group twice")
            published = item.get("published", "")
            if "published" in item:
                published = self.check_name(f"{entry} published", published)
            synonyms = self.strings(f"{entry} synonyms", item.get("synonyms", []), allow_empty=True)
            for word in (name, *synonyms):
                key = _key(word)
                if not key:
                    raise self.fail(entry, f"synonym {word!r} has no letters or digits")
                if key in owner:
                    raise self.fail(entry, f"{word!r} already names category {owner[key]!r}")
                owner[key] = name
            categories[name] = Category(
                name=name,
                super_category=item["super_category"],
                groups=tuple(applied),
                synonyms=tuple(synonyms),
                sources=self.source_ids(entry, item["sources"], sources),
                published=published,
                body_region=region,
            )
        return categories

    def check_value_restrictions(
        self, groups: Mapping[str, AttributeGroup], categories: Mapping[str, Category]
    ) -> None:
        # A restriction naming a category without the group is a typo or a stale entry; a
        # category left with no value of a group it lists would force every answer to not_visible.
        for group in groups.values():
            users = [cat.name for cat in categories.values() if group.name in cat.groups]
            for value in group.values:
                for field, named in (("applies", value.applies), ("not_for", value.not_for)):
                    for category in named:
                        if category not in categories:
                            raise self.fail(
                                f"group {group.name!r} value {value.name!r}",
                                f"{field} names unknown category {category!r}",
                            )
                        if category not in users:
                            raise self.fail(
                                f"group {group.name!r} value {value.name!r}",
                                f"{field} names {category!r}, which does not have group {group.name!r}",
                            )
            for category in users:
                if not any(value.applies_to(category) for value in group.values):
                    raise self.fail(
                        f"group {group.name!r}", f"no value applies to {category!r}; drop the group from it"
                    )

    def check_every_group_applied(
        self, groups: Mapping[str, AttributeGroup], categories: Mapping[str, Category]
    ) -> None:
        used = {group for cat in categories.values() for group in cat.groups}
        for name in groups:
            if name not in used:
                raise self.fail(
                    f"group {name!r}", "is applied to no category; add it to a category's groups or delete it"
                )

    def check_category_words(
        self, groups: Mapping[str, AttributeGroup], categories: Mapping[str, Category]
    ) -> None:
        # A published main_attribute is a bare value, and the metadata prior maps words to groups:
        # both need every word to mean one (group, value) among the groups of one category.
        words = {
            name: [
                (_key(word), value.name, word)
                for value in group.values
                for word in (value.name, *value.synonyms)
            ]
            for name, group in groups.items()
        }
        for cat in categories.values():
            meaning: dict[str, tuple[str, str, str]] = {}
            for group in cat.groups:
                for key, value, word in words[group]:
                    other = meaning.get(key)
                    if other is not None and other[0] != group:
                        raise self.fail(
                            f"category {cat.name!r}",
                            f"{word!r} means {group} {value!r} and also {other[0]} {other[1]!r} "
                            f"(as {other[2]!r}); a word may name one value among a category's groups",
                        )
                    meaning[key] = (group, value, word)


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """Load and validate a taxonomy file; ``None`` loads the packaged ``taxonomy.json``.

    The packaged file is read through :mod:`importlib.resources`, so this works from an
    installed wheel. Raise :class:`TaxonomyError` (message: file, entry, fault) if the file is
    missing, unreadable, not JSON, or breaks a rule.
    """
    read: Callable[..., str]
    if path is None:
        resource = resources.files(__package__ or "lookbench_live.schema").joinpath(PACKAGED_FILE)
        origin = str(resource)
        read = resource.read_text
    else:
        origin = str(path)
        read = Path(path).read_text
    try:
        text = read(encoding="utf-8")
    except FileNotFoundError:
        raise TaxonomyError(f"{origin}: file: not found; pass the path of a taxonomy JSON file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaxonomyError(f"{origin}: file: cannot be read as UTF-8 text ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaxonomyError(
            f"{origin}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})"
        ) from None
    return Taxonomy.from_dict(data, origin=origin)


@functools.cache
def default_taxonomy() -> Taxonomy:
    """The packaged taxonomy, loaded once per process."""
    return load_taxonomy()
