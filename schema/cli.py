"""The ``taxonomy`` command of the ``lookbench-live`` CLI.

Only :func:`register` is public; the main CLI calls it with its :class:`typer.Typer` app.
"""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from lookbench_live.schema.taxonomy import Taxonomy

# Exit code for a bad argument, the same code click uses for its own usage errors.
USAGE_ERROR = 2
BAD_FILE = 1


def register(app: typer.Typer) -> None:
    """Add the ``taxonomy`` command to ``app``."""
    app.command("taxonomy")(taxonomy_command)


def taxonomy_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the taxonomy as JSON: version, categories, groups, applies.")
    ] = False,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema", metavar="CATEGORY", help="Print the JSON Schema an annotation of CATEGORY must match."
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", metavar="PATH", help="Use this taxonomy file instead of the packaged one."),
    ] = None,
) -> None:
    """Show the fashion taxonomy: categories, the groups that apply to each, and every group's values.

    Every group also accepts not_visible. Exit code 2: unknown category; 1: bad taxonomy file.

    Examples:

    lookbench-live taxonomy

    lookbench-live taxonomy --json > taxonomy.json

    lookbench-live taxonomy --schema dress

    lookbench-live taxonomy --file edited.json --schema sneakers
    """
    # Imported here so that building the CLI stays fast for every other command.
    from lookbench_live.schema.taxonomy import TaxonomyError, default_taxonomy, load_taxonomy

    if as_json and schema is not None:
        typer.echo("error: use either --json or --schema, not both", err=True)
        raise typer.Exit(USAGE_ERROR)
    try:
        taxonomy = load_taxonomy(file) if file is not None else default_taxonomy()
    except TaxonomyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(BAD_FILE) from None
    if schema is not None:
        if schema not in taxonomy.categories:
            guess = taxonomy.normalize_category(schema)
            hint = f" (did you mean {guess!r}?)" if guess else ""
            typer.echo(
                f"error: unknown category {schema!r}{hint}; valid categories: {', '.join(taxonomy.category_names())}",
                err=True,
            )
            raise typer.Exit(USAGE_ERROR)
        _print_json(taxonomy.json_schema(schema))
    elif as_json:
        _print_json(taxonomy.to_json())
    else:
        _print_tables(taxonomy)


def _print_json(obj: Any) -> None:
    # Plain echo, not rich: the output must parse as JSON whatever the terminal width.
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False))


def _print_tables(taxonomy: "Taxonomy") -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    values = sum(len(group.values) for group in taxonomy.groups.values())
    console.print(
        f"[bold]LookBench taxonomy {taxonomy.version}[/bold]: {len(taxonomy.categories)} categories, "
        f"{len(taxonomy.groups)} attribute groups, {values} values  "
        f"(fingerprint {taxonomy.fingerprint[:12]}, {taxonomy.origin})"
    )
    categories = Table(title="Categories", show_lines=False)
    categories.add_column("category", style="bold")
    categories.add_column("super")
    categories.add_column("published as")
    categories.add_column("attribute groups")
    categories.add_column("synonyms", style="dim")
    for category in taxonomy.categories.values():
        categories.add_row(
            category.name,
            category.super_category,
            category.published_name,
            ", ".join(category.groups),
            ", ".join(category.synonyms),
        )
    console.print(categories)
    groups = Table(
        title="Attribute groups (each also accepts not_visible; * = only some categories, see --schema)"
    )
    groups.add_column("group", style="bold")
    groups.add_column("values")
    groups.add_column("sources", style="dim")
    for group in taxonomy.groups.values():
        name = group.name + (f" (up to {group.multi})" if group.multi > 1 else "")
        shown = ", ".join(v.name + ("*" if v.applies or v.not_for else "") for v in group.values)
        groups.add_row(name, shown, ", ".join(group.sources))
    console.print(groups)
