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

from lookbench_live.schema.taxonomy import rules
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


def parse(data: Any, *, origin: str = "<taxonomy>") -> Taxonomy:
    """Validate parsed taxonomy JSON and build a Taxonomy; :class:`TaxonomyError` on any fault.

    Each line of the message is ``origin: entry: fault`` (every fault of the structure, or the
    first broken rule across entries); nothing half-built is returned.
    """
    # Imported here, not at the top: the pydantic models cost a tenth of a second to build, and
    # most importers of the taxonomy (the CLI's other commands, the lake's readers) never parse.
    from lookbench_live.schema.taxonomy import structure

    try:
        file = structure.validate(data)
        rules.check(file)
    except structure.StructureError as exc:
        raise TaxonomyError("\n".join(f"{origin}: {entry}: {fault}" for entry, fault in exc.faults)) from None
    except rules.RuleError as exc:
        raise TaxonomyError(f"{origin}: {exc.entry}: {exc.fault}") from None
    groups = {
        g.name: AttributeGroup(
            g.name,
            tuple(
                AttributeValue(v.name, tuple(v.synonyms), tuple(v.applies), tuple(v.not_for))
                for v in g.values
            ),
            tuple(g.sources),
            g.multi,
        )
        for g in file.groups
    }
    categories = {
        c.name: Category(
            name=c.name,
            super_category=c.super_category,
            groups=tuple(c.groups),
            synonyms=tuple(c.synonyms),
            sources=tuple(c.sources),
            published=c.published,
            body_region=c.body_region,
        )
        for c in file.categories
    }
    # The fingerprint is of the content as written, so any change to the file changes it.
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return Taxonomy(
        version=file.version,
        categories=categories,
        groups=groups,
        sources={s.id: Source(s.id, s.title, s.licence, s.file, s.origin) for s in file.sources},
        super_categories=tuple(file.super_categories),
        fingerprint=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        origin=origin,
        body_regions=tuple(file.body_regions),
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
