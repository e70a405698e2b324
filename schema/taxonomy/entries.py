"""The taxonomy's entries as the rest of the product reads them, and the word rules they share.

Frozen dataclasses (a value, a group, a category, a source), the reserved answer
:data:`NOT_VISIBLE`, how a multi-valued answer is written (:data:`MULTI_SEPARATOR`,
:func:`split_values`, :func:`values_match`), and how a word is normalised before it is
compared (:func:`key`, :func:`lookup`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NOT_VISIBLE = "not_visible"
# Joins the values of a multi-valued group in a flat string column ("red|white").
MULTI_SEPARATOR = "|"
# A group may hold at most this many values per item: more is a list of everything, not a label.
MAX_MULTI = 3

_NON_ALNUM_RE = re.compile(r"[^0-9a-z]+")


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


@dataclass(frozen=True, slots=True)
class Source:
    """A published ontology the taxonomy draws on, with its licence as stated in the file header."""

    id: str
    title: str
    licence: str
    file: str = ""
    origin: str = ""


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


def key(text: str) -> str:
    """Case-, accent-, space- and punctuation-insensitive form: ``"V-Neck"`` -> ``"v neck"``."""
    plain = text.casefold()
    if not plain.isascii():  # accents only exist outside ASCII; the common case skips this
        plain = "".join(ch for ch in unicodedata.normalize("NFKD", plain) if not unicodedata.combining(ch))
    return " ".join(_NON_ALNUM_RE.sub(" ", plain).split())


def lookup(index: Mapping[str, Any], word: str) -> Any:
    """``index[word]``, else the singular of a plural word ("short sleeves", "dresses"), else None."""
    hit = index.get(word)
    if hit is None and word.endswith("s"):
        hit = index.get(word[:-1])
        if hit is None and word.endswith("es"):
            hit = index.get(word[:-2])
    return hit
