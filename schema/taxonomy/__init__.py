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

The parts: :mod:`.entries` (the dataclasses and word rules), :mod:`.model` (:class:`Taxonomy`
and its lookups), :mod:`.contract` (the annotation JSON Schema, payload validation, published
columns), :mod:`.structure` (the file's structure as pydantic models), :mod:`.rules` (what holds
across entries) and :mod:`.load` (reading a file, the packaged taxonomy).
"""

from lookbench_live.schema.taxonomy.entries import (
    MULTI_SEPARATOR,
    NOT_VISIBLE,
    AttributeGroup,
    AttributeValue,
    Category,
    Source,
    TaxonomyError,
    split_values,
    values_match,
)
from lookbench_live.schema.taxonomy.load import default_taxonomy, load_taxonomy
from lookbench_live.schema.taxonomy.model import Taxonomy

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
