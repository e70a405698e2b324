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
    "NOT_VISIBLE",
    "AttributeGroup",
    "AttributeValue",
    "Category",
    "Source",
    "Taxonomy",
    "TaxonomyError",
    "default_taxonomy",
    "load_taxonomy",
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
    {"title", "description", "version", "super_categories", "sources", "groups", "categories"}
)
_SOURCE_KEYS = frozenset({"id", "title", "file", "origin", "licence"})
_GROUP_KEYS = frozenset({"name", "sources", "values"})
_VALUE_KEYS = frozenset({"name", "synonyms"})
_CATEGORY_KEYS = frozenset({"name", "super_category", "groups", "synonyms", "sources"})


class TaxonomyError(ValueError):
    """A taxonomy file is malformed, or a caller named a category or group it does not have."""


@dataclass(frozen=True, slots=True)
class AttributeValue:
    """One value of a closed vocabulary; ``name`` is the published string."""

    name: str
    synonyms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AttributeGroup:
    """An attribute group (``neckline``, ``color``...): its values in file order and its source ids."""

    name: str
    values: tuple[AttributeValue, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Category:
    """A garment category; ``groups`` is ordered, and that order is the order of ``other_attributes``."""

    name: str
    super_category: str
    groups: tuple[str, ...]
    synonyms: tuple[str, ...]
    sources: tuple[str, ...]


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
    ) -> None:
        self.version = version
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
        # Per category: word -> (group, value); unique by construction (checked in from_dict).
        self._scan_terms: dict[str, dict[str, tuple[str, str]]] = {}
        self._scan_width: dict[str, int] = {}
        for category in categories.values():
            scan = {
                term: (group, value)
                for group in category.groups
                for term, value in self._value_terms[group].items()
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

    def category_values(self, category: str) -> list[str]:
        """Every value of every group of ``category``, in group order: the ``main_attribute`` vocabulary."""
        return [value for group in self._category(category).groups for value in self.values(group)]

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

    def json_schema(self, category: str) -> dict[str, Any]:
        """A flat JSON Schema for one annotation of ``category``.

        Properties: ``category`` (fixed), one string enum per applicable group (its values plus
        :data:`NOT_VISIBLE`), and ``main_attribute`` (enum of :meth:`category_values`). All are
        required, nothing else is allowed, and there is no ``allOf``/``anyOf``/``oneOf``/``$ref``:
        vLLM's grammar backend mis-compiles multi-branch schemas.
        """
        cat = self._category(category)
        properties: dict[str, Any] = {"category": {"type": "string", "enum": [cat.name]}}
        for group in cat.groups:
            properties[group] = {"type": "string", "enum": [*self.values(group), NOT_VISIBLE]}
        properties["main_attribute"] = {"type": "string", "enum": self.category_values(cat.name)}
        return {
            "title": f"LookBench {cat.name} annotation (taxonomy {self.version})",
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }

    def validate_annotation(self, category: str, payload: Any) -> list[str]:
        """Every way ``payload`` breaks :meth:`json_schema` or the main-attribute rule; empty if valid.

        Checked: unknown category, ``category`` key missing or different, a group missing, a
        value outside the group's vocabulary (``not_visible`` is allowed), an extra key, and a
        ``main_attribute`` that is missing, ``not_visible``, or not one of the payload's values.
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
            value = payload[group]
            if not isinstance(value, str):
                errors.append(f"{group}: value must be a string, got {type(value).__name__}")
            elif value != NOT_VISIBLE and value not in self._value_names[group]:
                hint = self.normalize_value(group, value)
                errors.append(
                    f"{group}: {value!r} is not in the vocabulary"
                    + (
                        f" (did you mean {hint!r}?)"
                        if hint
                        else f" (see `lookbench-live taxonomy --schema {cat.name}`)"
                    )
                )
            else:
                given.append(value)
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

    def published_columns(
        self, category: str, attributes: Mapping[str, str], main_attribute: str
    ) -> tuple[str, str]:
        """The release's ``(main_attribute, other_attributes)`` for one item.

        ``other_attributes`` is the visible values other than ``main_attribute``, in the category's
        group order, joined with ", ". ``attributes`` maps group -> value; absent groups count as
        not visible, and the keys ``category`` and ``main_attribute`` are ignored so a validated
        annotation can be passed as is. Raise :class:`TaxonomyError` for an unknown group or value,
        or a ``main_attribute`` that is not one of the visible values.
        """
        cat = self._category(category)
        unknown = [k for k in attributes if k not in cat.groups and k not in ("category", "main_attribute")]
        if unknown:
            raise TaxonomyError(f"{cat.name}: {', '.join(map(repr, unknown))} not groups of this category")
        visible: list[str] = []
        for group in cat.groups:
            value = attributes.get(group, NOT_VISIBLE)
            if value == NOT_VISIBLE:
                continue
            if value not in self._value_names[group]:
                raise TaxonomyError(f"{cat.name}: {group} value {value!r} is not in the vocabulary")
            visible.append(value)
        if main_attribute not in visible:
            raise TaxonomyError(
                f"{cat.name}: main_attribute {main_attribute!r} is not one of the visible values {visible}"
            )
        return main_attribute, ", ".join(v for v in visible if v != main_attribute)

    def to_json(self) -> dict[str, Any]:
        """The compact form: version, category names, group -> values, category -> groups."""
        return {
            "version": self.version,
            "categories": self.category_names(),
            "groups": {name: self.values(name) for name in self.groups},
            "applies": {name: list(cat.groups) for name, cat in self.categories.items()},
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
        sources = self.parse_sources(data.get("sources", []))
        groups = self.parse_groups(data["groups"], sources)
        categories = self.parse_categories(data["categories"], groups, sources, supers)
        self.check_every_group_applied(groups, categories)
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
        if name != name.strip().lower() or "," in name or "_" in name or "  " in name:
            raise self.fail(
                entry, f"name {name!r} must be lowercase words without commas, underscores or double spaces"
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
                values.append(AttributeValue(value, tuple(synonyms)))
            groups[name] = AttributeGroup(name, tuple(values), group_sources)
        return groups

    def parse_categories(
        self,
        items: Any,
        groups: Mapping[str, AttributeGroup],
        sources: Mapping[str, Source],
        supers: tuple[str, ...],
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
            applied = self.strings(f"{entry} groups", item["groups"])
            for group in applied:
                if group not in groups:
                    raise self.fail(
                        entry, f"names unknown group {group!r}; defined groups: {', '.join(groups)}"
                    )
            if len(set(applied)) != len(applied):
                raise self.fail(entry, "lists a group twice")
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
            )
        return categories

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
