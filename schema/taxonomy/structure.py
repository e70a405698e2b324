"""The taxonomy file's structure as pydantic models: every field's type and form, per entry.

Strict (a JSON file gives exact types: ``"2"`` or ``true`` is no ``multi``) and closed
(``extra="forbid"``: a typo such as ``"synonym"`` would otherwise drop data silently). What
holds across entries (unique names, known sources and groups, value restrictions, one meaning
per word) is :mod:`.rules`, checked once the structure holds.

Imported only when a file is validated (:func:`.load.validate`): building these models costs
more than the rest of the package's import, most importers never parse a file, and the packaged
file, validated once, is not validated again (:data:`.load.VALIDATED_FINGERPRINT`).
"""

from __future__ import annotations

import os
import re
import threading
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from lookbench_live.schema.taxonomy.entries import MAX_MULTI, MULTI_SEPARATOR, NOT_VISIBLE, key

# CalVer YYYY.M.N (see docs/taxonomy.md for when each part moves).
_VERSION_RE = re.compile(r"^(\d{4})\.(\d{1,2})\.(\d+)$")
_GROUP_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
# Keys of the annotation payload that are not groups; a group may not take these names.
RESERVED_KEYS = frozenset({"category", "main_attribute", "other_attributes", NOT_VISIBLE})


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def _word(value: str) -> str:
    """A synonym: compared by its normalised form, so it needs a letter or a digit."""
    _text(value)
    if not key(value):
        raise ValueError(f"{value!r} has no letters or digits")
    return value


def _name(value: str) -> str:
    """A value, category or published name: published verbatim and joined with ", " in
    other_attributes; "|" joins the values of a multi-valued group ("red|white")."""
    if not key(value):
        raise ValueError(f"{value!r} must be a non-empty string")
    if (
        value != value.strip().lower()
        or any(c in value for c in (",", "_", MULTI_SEPARATOR))
        or "  " in value
    ):
        raise ValueError(
            f"{value!r} must be lowercase words without commas, underscores, '|' or double spaces"
        )
    if key(value) == key(NOT_VISIBLE):
        raise ValueError(f"{value!r} is reserved: every group accepts {NOT_VISIBLE!r} implicitly")
    return value


Text = Annotated[str, AfterValidator(_text)]
Word = Annotated[str, AfterValidator(_word)]
Name = Annotated[str, AfterValidator(_name)]


class _Entry(BaseModel):
    # Built on first use (`_build`), not at import.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class SourceEntry(_Entry):
    id: Text
    title: Text
    licence: Text
    file: Text = ""
    origin: Text = ""


class ValueEntry(_Entry):
    name: Name
    synonyms: list[Word] = []
    applies: list[Text] = []
    not_for: list[Text] = []

    @model_validator(mode="after")
    def _one_restriction(self) -> ValueEntry:
        given = self.model_fields_set
        if "applies" in given and "not_for" in given:
            raise ValueError("give 'applies' or 'not_for', not both")
        if "applies" in given and not self.applies:
            raise ValueError("'applies' is empty: the value would apply nowhere")
        return self


class GroupEntry(_Entry):
    name: str
    sources: list[Text] = Field(min_length=1)
    values: list[ValueEntry] = Field(min_length=1)
    multi: int = 1

    @field_validator("name")
    @classmethod
    def _group_name(cls, name: str) -> str:
        if not _GROUP_NAME_RE.match(name) or name in RESERVED_KEYS:
            raise ValueError(f"{name!r} must be snake_case and not one of {sorted(RESERVED_KEYS)}")
        return name

    @field_validator("multi")
    @classmethod
    def _multi(cls, multi: int) -> int:
        if not 1 <= multi <= MAX_MULTI:
            raise ValueError(f"{multi!r} must be an integer from 1 to {MAX_MULTI}")
        return multi


class CategoryEntry(_Entry):
    name: Name
    super_category: str
    groups: list[Text] = Field(min_length=1)
    sources: list[Text] = Field(min_length=1)
    synonyms: list[Word] = []
    published: Name = ""  # "": published under its own name
    body_region: str = ""  # given or not matters: see rules (a file may declare no regions)

    @field_validator("groups")
    @classmethod
    def _groups_once(cls, groups: list[str]) -> list[str]:
        if len(set(groups)) != len(groups):
            raise ValueError("has a group twice")
        return groups


class TaxonomyFile(_Entry):
    version: str
    # Free text for readers of the file; nothing reads them.
    title: Any = None
    description: Any = None
    super_categories: list[Text] = []
    body_regions: list[Text] = []
    sources: list[SourceEntry] = []
    groups: list[GroupEntry] = Field(min_length=1)
    categories: list[CategoryEntry] = Field(min_length=1)

    @field_validator("version")
    @classmethod
    def _calver(cls, version: str) -> str:
        match = _VERSION_RE.match(version)
        if match is None or not 1 <= int(match.group(2)) <= 12:
            raise ValueError(f"{version!r} is not a YYYY.M.N version such as '2026.11.0'")
        return version

    @field_validator("body_regions")
    @classmethod
    def _regions_once(cls, regions: list[str]) -> list[str]:
        if len(set(regions)) != len(regions):
            raise ValueError("has a region twice")
        return regions


def validate(data: Any) -> TaxonomyFile:
    """The file's content as a :class:`TaxonomyFile`; :class:`StructureError` listing every fault."""
    if not TaxonomyFile.__pydantic_complete__:
        _build()
    try:
        return TaxonomyFile.model_validate(data)
    except ValidationError as exc:
        raise StructureError([fault(data, error) for error in exc.errors()]) from None


_BUILD = threading.Lock()


def _build() -> None:
    """Build the validator once, with pydantic's plugin discovery off, as typer builds its own: the
    discovery reads every installed distribution's entry points (about 25 ms of the `taxonomy`
    command's start), and the product uses no pydantic plugin."""
    with _BUILD:
        if TaxonomyFile.__pydantic_complete__:
            return
        previous = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
        try:
            TaxonomyFile.model_rebuild(force=True)
        finally:
            if previous is None:
                del os.environ["PYDANTIC_DISABLE_PLUGINS"]
            else:
                os.environ["PYDANTIC_DISABLE_PLUGINS"] = previous


class StructureError(ValueError):
    """The faults of a file's structure, each ``(entry, fault)``: where, in the file's words, and what."""

    def __init__(self, faults: list[tuple[str, str]]) -> None:
        self.faults = list(dict.fromkeys(faults))  # one line per fault, in file order
        super().__init__("; ".join(f"{entry}: {text}" for entry, text in self.faults))


_ENTRY_LISTS = {"sources": "sources", "groups": "group", "categories": "category"}


def fault(data: Any, error: Any) -> tuple[str, str]:
    """One pydantic error as ``(entry, fault)``: the entry named as the file names it (``group
    'color' values[1]``, ``category 'dress'``), the fault in words (the field, what is wrong)."""
    loc = list(error["loc"])
    kind = error["type"]
    if kind in ("missing", "extra_forbidden"):
        field = str(loc.pop())  # the entry is the object that lacks (or has) the key
    entry, rest = _entry(data, loc)
    where = "".join(f"[{part}]" if isinstance(part, int) else f" {part}" for part in rest).strip()
    if kind == "missing":
        text = f"missing required field {field!r}"
    elif kind == "extra_forbidden":
        text = f"unknown field(s) [{field!r}]; allowed: {sorted(_allowed(data, loc))}"
    elif kind in ("model_type", "dict_type"):
        text = f"must be a JSON object, got {type(error['input']).__name__}"
    elif kind == "value_error":
        # Our own rules: the field, then what is wrong with its value ("multi 9 must be ...").
        text = str(error["ctx"]["error"])
        return entry, f"{where} {text}" if where else text
    elif kind == "too_short":
        text = "must not be empty"
    else:
        text = f"{error['msg'][0].lower()}{error['msg'][1:]}, got {_json_type(error['input'])}"
    return entry, f"{where}: {text}" if where else text


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, as the file's author wrote it."""
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}
    if value is None:
        return "null"
    return names.get(type(value), "an object" if isinstance(value, dict) else type(value).__name__)


def _entry(data: Any, loc: list[Any]) -> tuple[str, list[Any]]:
    """The entry a location points into, and the rest of the location (field, list index)."""
    if not loc:
        return "top level", []
    head, rest = loc[0], loc[1:]
    if head not in _ENTRY_LISTS or not rest or not isinstance(rest[0], int):
        return str(head), rest
    index, rest = rest[0], rest[1:]
    item = _at(data, head, index)
    name = item.get("id" if head == "sources" else "name") if isinstance(item, dict) else None
    # By name when the name is sound and not itself the fault; by position otherwise.
    if isinstance(name, str) and head != "sources" and rest[:1] != ["name"]:
        entry = f"{_ENTRY_LISTS[head]} {name!r}"
    else:
        entry = f"{head}[{index}]"
    if head == "groups" and rest[:1] == ["values"] and len(rest) > 1 and isinstance(rest[1], int):
        entry, rest = f"{entry} values[{rest[1]}]", rest[2:]
    return entry, rest


def _at(data: Any, head: str, index: int) -> Any:
    items = data.get(head) if isinstance(data, dict) else None
    return items[index] if isinstance(items, list) and index < len(items) else None


def _allowed(data: Any, loc: list[Any]) -> set[str]:
    """The field names of the model at `loc` (the object holding the unknown key)."""
    model: type[BaseModel] = TaxonomyFile
    for part in loc:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[str(part)].annotation
        inner = getattr(annotation, "__args__", (annotation,))
        nested = [t for t in inner if isinstance(t, type) and issubclass(t, BaseModel)]
        if not nested:
            break
        model = nested[0]
    return set(model.model_fields)
