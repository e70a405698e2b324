"""The :class:`Taxonomy`: a validated taxonomy and its lookups (names, synonyms, what applies where).

Built by :mod:`.load` from a file whose structure :mod:`.structure` checked and whose
cross-references :mod:`.rules` checked; the annotation contract (JSON Schema, payload
validation, the published columns) is :mod:`.contract`, reached through the methods here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lookbench_live.schema.taxonomy import contract
from lookbench_live.schema.taxonomy.entries import (
    NOT_VISIBLE,
    AttributeGroup,
    Category,
    Source,
    TaxonomyError,
    key,
    lookup,
)


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
                    terms[key(term)] = value.name
        self._category_terms: dict[str, str] = {}
        for category in categories.values():
            for term in (category.name, *category.synonyms):
                self._category_terms[key(term)] = category.name
        # (category, group) -> the values that apply, in file order: the one answer to "which
        # values may this category take" that prompts, schemas, validation and the prior share.
        self._applicable: dict[tuple[str, str], tuple[str, ...]] = {
            (category.name, group): tuple(v.name for v in groups[group].values if v.applies_to(category.name))
            for category in categories.values()
            for group in category.groups
        }
        # Per category: word -> (group, value); unique by construction (`rules`: one meaning per category).
        # A term's length in words is counted once, not once per category that has its group, and
        # applicability is a set lookup: this index was most of the build (41 categories × ~1,300
        # terms), which every process that loads the taxonomy pays (issue 27).
        words = {term: len(term.split()) for terms in self._value_terms.values() for term in terms}
        self._scan_terms: dict[str, dict[str, tuple[str, str]]] = {}
        self._scan_width: dict[str, int] = {}
        for category in categories.values():
            scan: dict[str, tuple[str, str]] = {}
            for group_name in category.groups:
                applicable = frozenset(self._applicable[(category.name, group_name)])
                for term, value_name in self._value_terms[group_name].items():
                    if value_name in applicable:
                        scan[term] = (group_name, value_name)
            self._scan_terms[category.name] = scan
            self._scan_width[category.name] = max((words[t] for t in scan), default=1)

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
        from lookbench_live.schema.taxonomy.load import parse

        return parse(data, origin=origin)

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
        return list(self.category(category).groups)

    def values(self, group: str) -> list[str]:
        """The vocabulary of ``group`` in file order (without :data:`NOT_VISIBLE`)."""
        return [v.name for v in self._group(group).values]

    def in_vocabulary(self, group: str, value: str) -> bool:
        """Whether ``value`` is a value name of ``group``, whatever the category (False for unknown names)."""
        return value in self._value_names.get(group, ())

    def values_for(self, category: str, group: str) -> list[str]:
        """The values of ``group`` that apply to ``category``, in file order (without :data:`NOT_VISIBLE`).

        This is the vocabulary for one group of one category everywhere: AIGen prompts, the
        annotation JSON Schema, :meth:`validate_annotation` and the metadata prior. Raise
        :class:`TaxonomyError` if the group does not apply to the category at all.
        """
        cat = self.category(category)
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
        cat = self.category(category)
        return [value for group in cat.groups for value in self._applicable[(cat.name, group)]]

    def multi(self, group: str) -> int:
        """How many values one item may hold in ``group`` (1: a single value)."""
        return self._group(group).multi

    def body_region(self, category: str) -> str:
        """Where ``category`` is worn or held (``"head"``, ``"feet"``…); "" if the file names none."""
        return self.category(category).body_region

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
        return self.category(category).published_name

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
        candidates = self.category(category).groups if category is not None else tuple(self.groups)
        for group in candidates:
            if value in self._value_names[group]:
                return group
        return None

    def normalize_category(self, text: str) -> str | None:
        """The category named by ``text`` (its name or a synonym, ignoring case, spacing, punctuation,
        accents and a plural ``s``/``es``), or None. The text must be the whole name: "black dress" is None."""
        return lookup(self._category_terms, key(text))

    def normalize_value(self, group: str, text: str) -> str | None:
        """The value of ``group`` named by ``text`` (value or synonym, matched like
        :meth:`normalize_category`), :data:`NOT_VISIBLE` for "not visible", else None."""
        terms = self._value_terms[self._group(group).name]
        word = key(text)
        if word == key(NOT_VISIBLE):
            return NOT_VISIBLE
        return lookup(terms, word)

    def find_values(self, category: str, text: str) -> dict[str, str]:
        """Scan free text (title, description, tags) for values of ``category``'s groups.

        Words match whole (a term never matches inside a longer word), case- and
        punctuation-insensitively, plurals included. Overlapping matches are resolved longest
        first ("faux leather" beats "leather"), then leftmost. When a group matches more than
        once, the longest, then leftmost, match gives its value. Returns ``{group: value}`` in
        the category's group order; groups with no match are absent.
        """
        terms = self._scan_terms[self.category(category).name]
        width = self._scan_width[category]  # longest term in words: bounds the scan window
        words = key(text).split()
        matches: list[tuple[int, int, str, str]] = []
        for start in range(len(words)):
            for length in range(min(width, len(words) - start), 0, -1):
                hit = lookup(terms, " ".join(words[start : start + length]))
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
        """A flat JSON Schema for one annotation of ``category`` (:func:`.contract.json_schema`)."""
        return contract.json_schema(self, category, multi=multi)

    def validate_annotation(self, category: str, payload: Any, *, multi: bool = False) -> list[str]:
        """Every way ``payload`` breaks :meth:`json_schema` or the main-attribute rule; empty if valid
        (:func:`.contract.validate_annotation`)."""
        return contract.validate_annotation(self, category, payload, multi=multi)

    def published_columns(
        self, category: str, attributes: Mapping[str, Any], main_attribute: str
    ) -> tuple[str, str]:
        """The release's ``(main_attribute, other_attributes)`` for one item
        (:func:`.contract.published_columns`)."""
        return contract.published_columns(self, category, attributes, main_attribute)

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

    def category(self, name: str) -> Category:
        """The category named ``name`` (its exact name); :class:`TaxonomyError` naming the known ones."""
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
