"""The leaderboard: every model on every release, from the lake's `evaluations` table.

One row per (release, model, `--after`). The paper's layout (LookBench, Table 2) shows per subset
Coarse and Fine Recall@1, the overall scores (the mean over all queries, i.e. the subsets weighted
by their query counts: the `overall` rows evaluate writes) and the outfit-level Fine Recall@1 on
RealStreetLook (a look counts as a hit only when each of its crops is; evaluations written before
outfit metrics existed have none, shown as a dash). `lookbench-live leaderboard` and the report
print the same table from `paper_table`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lookbench_live.schema.release import SUBSETS, VersionError, version_key

# The paper's names of the subsets, in its column order.
SUBSET_TITLES = {
    "real_studio_flat": "Real Studio Flat",
    "aigen_studio": "AI-Gen Studio",
    "real_streetlook": "Real StreetLook",
    "aigen_streetlook": "AI-Gen StreetLook",
}
OUTFIT_SUBSET = "real_streetlook"
OUTFIT_METRIC = "outfit_fine_recall@1"
# The same, short, for a terminal's column headers.
SUBSET_SHORT = {
    "real_studio_flat": "Real\nStudio",
    "aigen_studio": "AIGen\nStudio",
    "real_streetlook": "Real\nStreet",
    "aigen_streetlook": "AIGen\nStreet",
}
# Short keys of the overall layout (`leaderboard --layout overall`, and every row's JSON).
OVERALL_KEYS = {"fine_recall@1": "fine_r1", "coarse_recall@1": "coarse_r1", "ndcg@5": "ndcg5", "mrr": "mrr"}
PAPER_METRICS = {"coarse_recall@1": "coarse", "fine_recall@1": "fine"}


def _number(value: Any) -> float | None:
    """A stored metric (text, percent) as a float rounded to 2 places; None when absent or not a number."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else round(number, 2)  # NaN is no score


def board_rows(
    evaluations: Iterable[Mapping[str, Any]],
    *,
    releases: Iterable[str] | None = None,
    leave_out: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """Leaderboard rows from `evaluations` records (dicts with release, model, subset, after,
    queries, metrics as key/value pairs or a mapping): newest release first, then all queries
    before `--after` rows, then best overall Fine R@1 first, then model name.

    Each row: model, release, after, the overall `fine_r1`, `coarse_r1`, `ndcg5`, `mrr`,
    `queries`; `subsets` (name -> {coarse_r1, fine_r1, queries}); `outfit_fine_r1` (None when
    the evaluation has no outfit metrics). A (release, model, after) with no `overall` row is
    left out (a partial write). `releases`: keep only these; `leave_out`: withdrawn releases."""
    keep = set(releases) if releases is not None else None
    dropped = set(leave_out)
    grouped: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for record in evaluations:
        release = record["release"]
        if release in dropped or (keep is not None and release not in keep):
            continue
        metrics = record.get("metrics") or {}
        if not isinstance(metrics, Mapping):
            metrics = {kv["key"]: kv["value"] for kv in metrics}
        key = (release, record["model"], record.get("after") or "")
        grouped.setdefault(key, {})[record["subset"]] = {"queries": record.get("queries"), **metrics}
    rows = []
    for (release, model, after), subsets in grouped.items():
        overall = subsets.get("overall")
        if overall is None:
            continue
        row: dict[str, Any] = {"model": model, "release": release, "after": after}
        row.update({short: _number(overall.get(name)) for name, short in OVERALL_KEYS.items()})
        row["queries"] = overall.get("queries")
        row["subsets"] = {
            subset: {
                **{
                    f"{short}_r1": _number(subsets[subset].get(name)) for name, short in PAPER_METRICS.items()
                },
                "queries": subsets[subset].get("queries"),
            }
            for subset in SUBSETS
            if subset in subsets
        }
        row["outfit_fine_r1"] = _number(subsets.get(OUTFIT_SUBSET, {}).get(OUTFIT_METRIC))
        rows.append(row)
    rows.sort(key=lambda r: (r["after"], -(r["fine_r1"] if r["fine_r1"] is not None else -1.0), r["model"]))
    # Newest release first in the one version order (string order puts v20261201.10 before
    # v20261201.2); the sort is stable, so the order above holds within a release.
    rows.sort(key=lambda r: _release_order(r["release"]), reverse=True)
    return rows


def _release_order(name: str) -> tuple[int, Any]:
    """`version_key`; a name that is no version (an old evaluation row) sorts after every release."""
    try:
        return 1, version_key(name)
    except VersionError:
        return 0, name


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def paper_table(rows: list[dict[str, Any]], *, short: bool = False) -> dict[str, Any]:
    """The paper's layout of `board_rows`: `groups` (title, column count) over `headers`, and
    `rows` of text (a dash where a score is missing). The `after` column appears only when a
    row has one. `short`: terse titles and headers, for a terminal."""
    titles = SUBSET_SHORT if short else SUBSET_TITLES
    coarse, fine = ("coarse", "fine") if short else ("coarse R@1", "fine R@1")
    with_after = any(r["after"] for r in rows)
    keys = ["model", "release"] + (["after"] if with_after else [])
    groups: list[tuple[str, int]] = [("", len(keys))]
    headers = list(keys)
    for subset in SUBSETS:
        groups.append((titles[subset], 2))
        headers += [coarse, fine]
    groups.append(("Overall\n" if short else "Overall", 2))
    headers += [coarse, fine]
    groups.append(("Outfit\nRealStreet" if short else "Outfit (Real StreetLook)", 1))
    headers.append(fine)
    table_rows = []
    for r in rows:
        cells = [r["model"], r["release"]] + ([r["after"] or "all"] if with_after else [])
        for subset in SUBSETS:
            entry = r["subsets"].get(subset, {})
            cells += [_cell(entry.get("coarse_r1")), _cell(entry.get("fine_r1"))]
        cells += [_cell(r["coarse_r1"]), _cell(r["fine_r1"]), _cell(r["outfit_fine_r1"])]
        table_rows.append(cells)
    return {"keys": len(keys), "groups": groups, "headers": headers, "rows": table_rows}


def overall_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The overall layout: overall Fine/Coarse R@1, nDCG@5, MRR and queries per row."""
    headers = ["model", "release", "after", *OVERALL_KEYS.values(), "queries"]
    table_rows = [
        [
            r["model"],
            r["release"],
            r["after"] or "all",
            *[_cell(r[k]) for k in OVERALL_KEYS.values()],
            str(r["queries"]),
        ]
        for r in rows
    ]
    return {"keys": 3, "groups": [("", 3)] + [("", 1)] * 5, "headers": headers, "rows": table_rows}
