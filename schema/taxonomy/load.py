"""Reading a taxonomy: the file, its structure (:mod:`.structure`), its rules (:mod:`.rules`), the
:class:`Taxonomy` built from it; and the packaged taxonomy, loaded once per process."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from lookbench_live.schema.taxonomy.entries import (
    AttributeGroup,
    AttributeValue,
    Category,
    Source,
    TaxonomyError,
)
from lookbench_live.schema.taxonomy.model import Taxonomy

PACKAGED_FILE = "taxonomy.json"
PACKAGE = "lookbench_live.schema"  # the packaged file sits beside the `taxonomy` package
# The fingerprint of the packaged taxonomy.json, whose content passed the full validation below
# (structure and rules). Validation is a function of the content alone, so content with this
# fingerprint is not validated again: that skips importing pydantic and building its models,
# about 0.08 s of every process that loads the taxonomy (`lookbench-live taxonomy`: issue 27,
# docs/benchmarks.md). tests/schema/test_taxonomy.py validates the packaged file in full and
# fails, printing the new value, when the file changed and this was not updated; until then the
# packaged file is only validated on every load, as any other file is.
VALIDATED_FINGERPRINT = "7a7904f2c8a26cd91b53789701528580425dd4856d304bc9ebca768954d75cca"


def parse(data: Any, *, origin: str = "<taxonomy>") -> Taxonomy:
    """Validate parsed taxonomy JSON and build a Taxonomy; :class:`TaxonomyError` on any fault.

    Each line of the message is ``origin: entry: fault`` (every fault of the structure, or the
    first broken rule across entries); nothing half-built is returned. Content whose fingerprint
    is :data:`VALIDATED_FINGERPRINT` is built without validating it again.
    """
    try:
        fingerprint: str | None = fingerprint_of(data)
    except (TypeError, ValueError):
        fingerprint = None  # not JSON content: the validation names the fault
    if fingerprint is None or fingerprint != VALIDATED_FINGERPRINT:
        validate(data, origin=origin)
    return build(data, origin=origin, fingerprint=fingerprint or fingerprint_of(data))


def fingerprint_of(data: Any) -> str:
    """sha256 of the content as written (canonical JSON), so any change to the file changes it."""
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def validate(data: Any, *, origin: str = "<taxonomy>") -> None:
    """The full validation: the file's structure (:mod:`.structure`), then the rules across
    entries (:mod:`.rules`); :class:`TaxonomyError` on any fault, else the content may be built."""
    # Imported here, not at the top: the pydantic models cost a tenth of a second to build, and
    # most importers of the taxonomy (the CLI's other commands, the lake's readers) never parse.
    from lookbench_live.schema.taxonomy import rules, structure

    try:
        rules.check(structure.validate(data))
    except structure.StructureError as exc:
        raise TaxonomyError("\n".join(f"{origin}: {entry}: {fault}" for entry, fault in exc.faults)) from None
    except rules.RuleError as exc:
        raise TaxonomyError(f"{origin}: {exc.entry}: {exc.fault}") from None


def build(data: Any, *, origin: str, fingerprint: str) -> Taxonomy:
    """The Taxonomy of content that passed :func:`validate`, read from the parsed JSON itself.

    Strict validation converts nothing, so the JSON holds the models' values; a field left out
    takes the default its model in :mod:`.structure` gives it (a test holds the two equal).
    """
    groups = {
        g["name"]: AttributeGroup(
            g["name"],
            tuple(
                AttributeValue(
                    v["name"],
                    tuple(v.get("synonyms", ())),
                    tuple(v.get("applies", ())),
                    tuple(v.get("not_for", ())),
                )
                for v in g["values"]
            ),
            tuple(g["sources"]),
            g.get("multi", 1),
        )
        for g in data["groups"]
    }
    categories = {
        c["name"]: Category(
            name=c["name"],
            super_category=c["super_category"],
            groups=tuple(c["groups"]),
            synonyms=tuple(c.get("synonyms", ())),
            sources=tuple(c["sources"]),
            published=c.get("published", ""),
            body_region=c.get("body_region", ""),
        )
        for c in data["categories"]
    }
    sources = {
        s["id"]: Source(s["id"], s["title"], s["licence"], s.get("file", ""), s.get("origin", ""))
        for s in data.get("sources", ())
    }
    return Taxonomy(
        version=data["version"],
        categories=categories,
        groups=groups,
        sources=sources,
        super_categories=tuple(data.get("super_categories", ())),
        fingerprint=fingerprint,
        origin=origin,
        body_regions=tuple(data.get("body_regions", ())),
    )


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """Load and validate a taxonomy file; ``None`` loads the packaged ``taxonomy.json``.

    The packaged file is read through :mod:`importlib.resources`, so this works from an
    installed wheel. Raise :class:`TaxonomyError` (message: file, entry, fault) if the file is
    missing, unreadable, not JSON, or breaks a rule.
    """
    read: Callable[..., str]
    if path is None:
        resource = resources.files(PACKAGE).joinpath(PACKAGED_FILE)
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
    return parse(data, origin=origin)


@functools.cache
def default_taxonomy() -> Taxonomy:
    """The packaged taxonomy, loaded once per process."""
    return load_taxonomy()
