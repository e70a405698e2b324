"""`lookbench-live evaluate`, `lookbench-live leaderboard` and `lookbench-live report`."""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Any

import typer

from lookbench_live.schema.moments import parse_day

HomeOption = Annotated[
    str | None, typer.Option("--home", help="Lake root (default $LOOKBENCH_HOME or ./lookbench-data).")
]
ConfigOption = Annotated[str | None, typer.Option("--config", help="TOML configuration file.")]


def _parse_date(text: str | None) -> dt.date | None:
    if not text:
        return None
    try:
        return parse_day(text)
    except ValueError as exc:
        raise typer.BadParameter(f"--after {text!r} is not an ISO date (YYYY-MM-DD)") from exc


def _lake(home: str | None, config: str | None) -> tuple[Any, Any]:
    from lookbench_live.config import load_settings
    from lookbench_live.warehouse.lake import Lake

    settings = load_settings(config)
    return Lake(home or settings.lake.home), settings


def _print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    # Short headers keep the table readable at 80 columns; --json has every key.
    shown = {
        "coarse_recall@1": "coarse@1",
        "fine_recall@1": "fine@1",
        "fine_recall@5": "fine@5",
        "fine_recall@20": "fine@20",
        "strict_recall@1": "strict@1",
        "ndcg@5": "ndcg@5",
        "mrr": "mrr",
    }
    after = f", queries after {result['after']}" if result.get("after") else ""
    table = Table(title=f"{result['model']} on {result['release']}{after} (percent)")
    table.add_column("subset", no_wrap=True, min_width=16)
    table.add_column("queries", justify="right")
    for header in shown.values():
        table.add_column(header, justify="right")
    for subset, entry in [*result["subsets"].items(), ("overall", result["overall"])]:
        values = ["–" if entry.get(n) is None else f"{entry[n]:.2f}" for n in shown]
        table.add_row(subset, str(entry["queries"]), *values, style="bold" if subset == "overall" else None)
    Console().print(table)


def _print_gap(out: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    shown = ("fine_recall@1", "coarse_recall@1", "ndcg@5", "mrr")
    table = Table(title=f"Contamination gap of {out['model']}, cutoff {out['after']} (percent)")
    table.add_column("queries first seen", no_wrap=True)
    table.add_column("queries", justify="right")
    for name in shown:
        table.add_column(name, justify="right")
    for label, key in (("on/before cutoff", "before"), ("after cutoff", "after_cutoff")):
        entry = out[key]
        table.add_row(
            label, str(entry["queries"]), *["–" if entry[n] is None else f"{entry[n]:.2f}" for n in shown]
        )
    gap = out["gap"]
    table.add_row(
        "gap (before - after)",
        "",
        *["–" if gap[n] is None else f"{gap[n]:+.2f}" for n in shown],
        style="bold",
    )
    Console().print(table)


def _verified(lake: Any, versions: list[str], allow_unverified: bool) -> tuple[list[str], bool]:
    """Verify each release before it is scored (X13): a tampered or damaged release gives scores
    nobody should trust. One that fails stops the command (exit 1) naming its first fault, unless
    `--allow-unverified`; then a warning, and the caller prints the scores without recording
    them (False). Returns the versions resolved (`latest` named once, so the release scored is
    the one verified) and whether every one verified."""
    from lookbench_live.schema.committed import resolve_version
    from lookbench_live.schema.verify import verify_release

    verified, out = True, []
    for version in versions:
        resolved = resolve_version(lake, version)
        out.append(resolved)
        problems = verify_release(lake, resolved)
        if not problems:
            continue
        where = f"release {resolved} fails verification: {problems[0]}" + (
            f" (and {len(problems) - 1} more; `lookbench-live release verify {resolved}` lists them)"
            if len(problems) > 1
            else ""
        )
        if not allow_unverified:
            typer.echo(
                f"error: {where}; refusing to score it (--allow-unverified scores it anyway)", err=True
            )
            raise typer.Exit(1)
        typer.echo(
            f"warning: {where}; scoring it anyway (--allow-unverified): the scores are printed, "
            "not recorded in the evaluations table",
            err=True,
        )
        verified = False
    return out, verified


def evaluate(
    version: Annotated[str, typer.Argument(help="vYYYYMMDD or latest.")] = "latest",
    releases: Annotated[
        str | None,
        typer.Option(
            help="A range of releases, e.g. v20260901..latest (or 'all', or a comma list): scores each; "
            "with --after, also the contamination gap over them."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="HF id, local folder or open_clip:ARCH/TAG (default: the weight-free baseline); with --embeddings, only the name of the result."
        ),
    ] = None,
    embeddings: Annotated[
        str | None, typer.Option(help="Parquet file (sha256, embedding) covering every image of the release.")
    ] = None,
    after: Annotated[
        str | None,
        typer.Option(help="Keep queries first seen or published after this date (YYYY-MM-DD, UTC)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    trust_remote_code: Annotated[
        bool, typer.Option(help="Allow model code from the model folder (GR-Lite).")
    ] = False,
    allow_unverified: Annotated[
        bool,
        typer.Option(
            "--allow-unverified",
            help="Score a release that fails `release verify` anyway (a warning; the scores are "
            "printed, not recorded).",
        ),
    ] = False,
    home: HomeOption = None,
    config: ConfigOption = None,
) -> None:
    """Score a release: Coarse/Fine/Strict/Item Recall@1,5,10,20, nDCG@K and MRR per subset and overall.

    Examples:

      lookbench-live evaluate latest

      lookbench-live evaluate v20261201 --model ./models/siglip --after 2026-06-30 --json

      lookbench-live evaluate latest --embeddings my_model.parquet --model my-model

      lookbench-live evaluate --releases v20260901..latest --after 2026-10-15
    """
    from lookbench_live.evaluation.evaluate import evaluate_release, evaluation_records

    lake, settings = _lake(home, config)
    s = settings.evaluation
    # Refuse before scoring when another writer holds the lake (the append below needs it).
    with lake.writer_lock("evaluate"):
        pass
    if releases is not None:
        _evaluate_range(
            lake,
            settings,
            releases,
            model,
            embeddings,
            _parse_date(after),
            trust_remote_code,
            as_json,
            allow_unverified,
        )
        return
    (version,), record = _verified(lake, [version], allow_unverified)
    result = evaluate_release(
        lake,
        version,
        model=model,
        embeddings=embeddings,
        after=_parse_date(after),
        trust_remote_code=trust_remote_code or s.trust_remote_code,
        batch_size=s.batch_size,
        chunk_size=s.chunk_size,
        device=s.device,
        write=False,
    )
    if record:
        # Scoring may take long; the writer lock is held only for the append.
        with lake.writer_lock("evaluate"):
            lake.append(evaluation_records(result))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        _print_table(result)


def _evaluate_range(
    lake: Any,
    settings: Any,
    releases: str,
    model: str | None,
    embeddings: str | None,
    after: dt.date | None,
    trust_remote_code: bool,
    as_json: bool,
    allow_unverified: bool = False,
) -> None:
    from lookbench_live.evaluation.contamination import evaluate_range, resolve_range
    from lookbench_live.evaluation.evaluate import evaluation_records
    from lookbench_live.schema.committed import ReleaseError

    s = settings.evaluation
    try:
        versions = resolve_range(lake, releases)
    except ReleaseError as exc:
        raise typer.BadParameter(str(exc), param_hint="--releases") from exc
    versions, record = _verified(lake, versions, allow_unverified)
    out = evaluate_range(
        lake,
        versions,
        model=model,
        embeddings=embeddings,
        after=after,
        trust_remote_code=trust_remote_code or s.trust_remote_code,
        batch_size=s.batch_size,
        chunk_size=s.chunk_size,
        device=s.device,
    )
    if record:
        with lake.writer_lock():
            for result in out["releases"]:
                lake.append(evaluation_records(result))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    for result in out["releases"]:
        _print_table(result)
    if after is not None:
        _print_gap(out)


def leaderboard_rows(lake: Any) -> list[dict[str, Any]]:
    """Every model on every release that is not withdrawn (`evaluation.leaderboard.board_rows`):
    newest release first, best overall Fine R@1 first."""
    from lookbench_live.evaluation.leaderboard import board_rows
    from lookbench_live.schema.committed import withdrawn_versions

    return board_rows(lake.read("evaluations").to_pylist(), leave_out=withdrawn_versions(lake))


LAYOUTS = ("paper", "overall")


def leaderboard(
    layout: Annotated[
        str,
        typer.Option(
            help="paper: per subset Coarse and Fine R@1, overall, and outfit-level Fine R@1 on Real "
            "StreetLook (the LookBench paper's table); overall: overall Fine/Coarse R@1, nDCG@5, MRR.",
        ),
    ] = "paper",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print rows as JSON (every layout's values in each row).")
    ] = False,
    home: HomeOption = None,
    config: ConfigOption = None,
) -> None:
    """Models across releases, from the lake's `evaluations` table (percent), as wide as the terminal.

    Examples:

      lookbench-live leaderboard

      lookbench-live leaderboard --layout overall

      lookbench-live leaderboard --json
    """
    from lookbench_live.evaluation.leaderboard import overall_table, paper_table
    from lookbench_live.terminal import print_table

    if layout not in LAYOUTS:
        raise typer.BadParameter(f"{layout!r} is not one of {', '.join(LAYOUTS)}", param_hint="--layout")
    lake, _ = _lake(home, config)
    rows = leaderboard_rows(lake)
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        typer.echo("no evaluations yet: run `lookbench-live evaluate latest`")
        return
    if layout == "paper":
        table = paper_table(rows, short=True)
        title = "Leaderboard: Recall@1 per subset, overall (weighted by queries) and per outfit (percent)"
    else:
        table = overall_table(rows)
        title = "Leaderboard (overall, percent)"
    print_table(title, table["headers"], table["rows"], keys=table["keys"], groups=table["groups"])


def report(
    version: Annotated[str, typer.Argument(help="vYYYYMMDD or latest.")] = "latest",
    open_it: Annotated[bool, typer.Option("--open", help="Open the report in the default browser.")] = False,
    rewrite: Annotated[bool, typer.Option(help="Write a fresh report even if one exists.")] = False,
    home: HomeOption = None,
    config: ConfigOption = None,
) -> None:
    """The release report (self-contained HTML). Uses the one written beside the manifest when
    the release has it; otherwise writes <lake>/reports/<version>/report.html."""
    from lookbench_live.evaluation.report import REPORT_NAME, default_report_path, write_report
    from lookbench_live.schema.committed import release_dir, resolve_version

    lake, settings = _lake(home, config)
    version = resolve_version(lake, version)
    path = default_report_path(lake, version)
    in_release = path == f"{release_dir(lake, version)}/{REPORT_NAME}"
    if rewrite and in_release:
        path = lake.path("reports", version, REPORT_NAME)
    if rewrite or not lake.fs.exists(path):
        from lookbench_live.evaluation.evaluate import run_evaluation

        samples = settings.evaluation.report_samples
        # The grids show the baseline's retrieval (embeddings from the release's cache); the
        # scores shown are the `evaluations` table's, nothing new is recorded.
        runs = [run_evaluation(lake, version)] if samples else []
        with lake.writer_lock("report"):
            write_report(lake, version, path, evaluations=runs, samples=samples)
    url = lake.url(*path[len(lake.root.rstrip("/")) + 1 :].split("/"))
    typer.echo(url)
    if open_it:
        if not lake.local:
            raise typer.BadParameter("--open needs a local lake; download the report first")
        import pathlib
        import webbrowser

        webbrowser.open(pathlib.Path(path).as_uri())


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
    app.command("leaderboard")(leaderboard)
    app.command("report")(report)
