"""What must hold across a taxonomy file's entries, once each entry's structure holds (:mod:`.structure`).

Names are unique (sources, groups, categories); entries name only sources, groups, super
categories and body regions the file declares; every group is applied to some category; a value
restriction names categories that have its group, and leaves each of them some value; within a
group, and among one category's groups, a word (value or synonym, normalised) has one meaning.
:func:`check` raises :class:`RuleError` at the first fault, in file order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from lookbench_live.schema.taxonomy.entries import key

if TYPE_CHECKING:
    from lookbench_live.schema.taxonomy.structure import CategoryEntry, GroupEntry, TaxonomyFile


class RuleError(ValueError):
    """A rule across entries is broken: ``entry`` (as the file names it) and ``fault``."""

    def __init__(self, entry: str, fault: str) -> None:
        self.entry, self.fault = entry, fault
        super().__init__(f"{entry}: {fault}")


def check(file: TaxonomyFile) -> None:
    """Every rule across entries, in file order; :class:`RuleError` at the first fault."""
    sources = _unique("source", (s.id for s in file.sources), "listed twice")
    _unique("group", (g.name for g in file.groups), "defined twice")
    for group in file.groups:
        _known_sources(f"group {group.name!r}", group.sources, sources)
        _one_meaning_within(group)
    _unique("category", (c.name for c in file.categories), "defined twice")
    owner: dict[str, str] = {}  # normalised word -> the category it names
    groups = [g.name for g in file.groups]
    for category in file.categories:
        _category_refs(file, category, groups, sources)
        for word in (category.name, *category.synonyms):
            if key(word) in owner:
                raise RuleError(
                    f"category {category.name!r}", f"{word!r} already names category {owner[key(word)]!r}"
                )
            owner[key(word)] = category.name
    _every_group_applied(file)
    _restrictions(file)
    _one_meaning_per_category(file)


def _unique(kind: str, names: Iterable[str], fault: str) -> list[str]:
    seen: list[str] = []
    for name in names:
        if name in seen:
            raise RuleError(f"{kind} {name!r}", fault)
        seen.append(name)
    return seen


def _known_sources(entry: str, named: Sequence[str], sources: Sequence[str]) -> None:
    for source in named:
        if source not in sources:
            raise RuleError(entry, f"source {source!r} is not in the header's sources {sorted(sources)}")


def _one_meaning_within(group: GroupEntry) -> None:
    seen: dict[str, tuple[str, str]] = {}  # normalised word -> (value, word as written)
    for value in group.values:
        for word in (value.name, *value.synonyms):
            if key(word) in seen:
                other_value, other_word = seen[key(word)]
                raise RuleError(
                    f"group {group.name!r} value {value.name!r}",
                    f"{word!r} duplicates {other_word!r} of value {other_value!r} (both read {key(word)!r}); "
                    "within a group each word may appear once",
                )
            seen[key(word)] = (value.name, word)


def _category_refs(
    file: TaxonomyFile, category: CategoryEntry, groups: Sequence[str], sources: Sequence[str]
) -> None:
    entry = f"category {category.name!r}"
    supers, regions = file.super_categories, file.body_regions
    if supers and category.super_category not in supers:
        raise RuleError(entry, f"super_category {category.super_category!r} is not one of {list(supers)}")
    # Declared regions bind every category to one (the layout prior and the product-box match
    # need it for all of them); a file without regions has none.
    if regions and category.body_region not in regions:
        raise RuleError(entry, f"body_region {category.body_region!r} is not one of {list(regions)}")
    if not regions and "body_region" in category.model_fields_set:
        raise RuleError(entry, "body_region given but the file declares no body_regions")
    for group in category.groups:
        if group not in groups:
            raise RuleError(entry, f"names unknown group {group!r}; defined groups: {', '.join(groups)}")
    _known_sources(entry, category.sources, sources)


def _every_group_applied(file: TaxonomyFile) -> None:
    used = {group for category in file.categories for group in category.groups}
    for group in file.groups:
        if group.name not in used:
            raise RuleError(
                f"group {group.name!r}",
                "is applied to no category; add it to a category's groups or delete it",
            )


def _restrictions(file: TaxonomyFile) -> None:
    # A restriction naming a category without the group is a typo or a stale entry; a category
    # left with no value of a group it lists would force every answer to not_visible.
    names = {category.name for category in file.categories}
    for group in file.groups:
        users = [c.name for c in file.categories if group.name in c.groups]
        for value in group.values:
            for field, named in (("applies", value.applies), ("not_for", value.not_for)):
                for category in named:
                    entry = f"group {group.name!r} value {value.name!r}"
                    if category not in names:
                        raise RuleError(entry, f"{field} names unknown category {category!r}")
                    if category not in users:
                        raise RuleError(
                            entry, f"{field} names {category!r}, which does not have group {group.name!r}"
                        )
        for category in users:
            if not any(_applies(value.applies, value.not_for, category) for value in group.values):
                raise RuleError(
                    f"group {group.name!r}", f"no value applies to {category!r}; drop the group from it"
                )


def _applies(applies: Sequence[str], not_for: Sequence[str], category: str) -> bool:
    if applies:
        return category in applies
    return category not in not_for


def _one_meaning_per_category(file: TaxonomyFile) -> None:
    # A published main_attribute is a bare value, and the metadata prior maps words to groups:
    # both need every word to mean one (group, value) among the groups of one category.
    words = {
        group.name: [
            (key(word), value.name, word) for value in group.values for word in (value.name, *value.synonyms)
        ]
        for group in file.groups
    }
    for category in file.categories:
        meaning: dict[str, tuple[str, str, str]] = {}
        for group in category.groups:
            for word_key, value, word in words[group]:
                other = meaning.get(word_key)
                if other is not None and other[0] != group:
                    raise RuleError(
                        f"category {category.name!r}",
                        f"{word!r} means {group} {value!r} and also {other[0]} {other[1]!r} "
                        f"(as {other[2]!r}); a word may name one value among a category's groups",
                    )
                meaning[word_key] = (group, value, word)
