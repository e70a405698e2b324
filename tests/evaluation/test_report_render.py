"""The release report: content from the lake, self-contained, and visible in headless Chromium."""

from __future__ import annotations

import datetime as dt
import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from evaluation_fixtures import T0, make_release, sample_rows

from lookbench_live.evaluation.evaluate import evaluate_release_run
from lookbench_live.evaluation.report import default_report_path, previous_version, wilson, write_report
from lookbench_live.schema.records import Annotation, Audit, DedupDecision, ImageRecord, Rejection
from lookbench_live.warehouse.lake import Lake

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
V1, V2 = "v20261001", "v20261101"
NOW = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)


def _fill_lake(lake: Lake) -> None:
    sha = "ab" * 32
    lake.append(
        [
            DedupDecision(sha256=sha, hash_method="m", decision="kept", run_id="r"),
            DedupDecision(
                sha256="cd" * 32,
                hash_method="m",
                decision="dropped",
                reason="near_in_run",
                matched_sha256=sha,
                distance=3,
                run_id="r",
            ),
        ]
    )
    lake.append(
        [
            ImageRecord(
                source_url="https://x/1.jpg",
                owner_kind="product",
                owner_id="shop:1",
                source="shop",
                status="rejected",
                rejection_reason="decompression_bomb",
                fetched_at=NOW,
                first_seen_at=NOW,
            ),
        ]
    )
    lake.append([Rejection(stage="crawl", item="https://x/p", reason="robots_disallowed")])
    lake.append(
        [
            Annotation(
                sha256=sha,
                bbox="",
                task="attributes",
                taxonomy_version="test-1",
                prompt_version="p1",
                model="qwen",
                source="vlm",
                status="failed",
                error="schema_invalid: colour not in taxonomy",
            ),
        ]
    )
    lake.append(
        [
            Audit(
                sha256=f"{i:064x}",
                bbox="",
                taxonomy_version="test-1",
                annotation_model="qwen",
                judge_model="judge-x",
                subset="aigen_studio",
                category="dress",
                status="ok",
                verdicts={
                    "colour": "correct" if i % 4 else "wrong",
                    "pattern": "correct",
                    "length": "cannot_tell",
                },
            )
            for i in range(20)
        ]
    )


@pytest.fixture()
def report_lake(tmp_path) -> Lake:
    lake = Lake(tmp_path / "lake")
    make_release(lake, V1, sample_rows(shift=1))
    make_release(lake, V2, sample_rows())
    _fill_lake(lake)
    return lake


def test_report_content(report_lake):
    lake = report_lake
    # The report shows the run it is given (it never evaluates): its grids are that run's top 5.
    run = evaluate_release_run(lake, V2)
    path = write_report(lake, V2, lake.path("reports", V2, "report.html"), evaluations=[run])
    assert path == default_report_path(lake, V2)
    text = Path(path).read_text()
    # Self-contained: no script, no external resource; every image inline.
    assert "<script" not in text
    assert not re.search(r'(src|href)="(https?:)?//', text)
    thumbs = re.findall(r'src="data:image/jpeg;base64,', text)
    assert len(thumbs) == 4 * 3 * 6  # 4 subsets × 3 sample queries × (query + top 5)
    assert previous_version(lake, V2) == V1 and f"Drift against {V1}" in text
    assert "near_in_run" in text and "decompression_bomb" in text and "robots_disallowed" in text
    assert "schema_invalid" in text
    # Judge: colour 15 of 20 correct, with its Wilson interval; cannot_tell left out.
    low, high = wilson(15, 20)
    assert (round(low, 4), round(high, 4)) == (0.5313, 0.8881)  # the textbook Wilson interval
    assert f"{100 * low:.1f}–{100 * high:.1f}%" in text and "75.0%" in text
    assert "baseline:hsv-hog-v1" in text and "fine_recall@1" in text
    assert 'class="cell fine"' in text  # hits are marked


def _section(text: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', text, re.S)
    assert match, name
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", match.group(1))).split())


def _table_rows(text: str, cls: str) -> list[list[str]]:
    """The body rows of the first `<table class="cls">`, as cell texts."""
    match = re.search(rf'<table class="{cls}">.*?<tbody>(.*?)</tbody>', text, re.S)
    assert match, cls
    return [
        [
            html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        ]
        for tr in re.findall(r"<tr>(.*?)</tr>", match.group(1), re.S)
    ]


def test_changes_since_the_previous_release_leaderboard_and_run_outcomes(report_lake, monkeypatch):
    lake, v3 = report_lake, "v20261201"
    rows = sample_rows()
    for row in rows["aigen_studio/query"] + rows["aigen_studio/gallery"]:
        # A new shop this month, selling skirts, first seen after everything of the previous release.
        row.update(source="boutique", category="skirt", first_seen_at=T0 + dt.timedelta(days=45))
    make_release(lake, v3, rows)
    for version in (V1, V2):
        evaluate_release_run(lake, version)
    run = evaluate_release_run(lake, v3)

    # The report shows what it is given and never evaluates.
    from lookbench_live.evaluation import evaluate as evaluate_mod

    def no_evaluation(*args, **kwargs):
        raise AssertionError("write_report must not evaluate")

    monkeypatch.setattr(evaluate_mod, "run_evaluation", no_evaluation)
    monkeypatch.setattr(evaluate_mod, "evaluate_release", no_evaluation)
    context = {
        "sites": [
            {"site": "shop", "status": "ok", "reason": ""},
            {"site": "<b>atelier</b>", "status": "failed", "reason": "connection refused"},
            {"site": "bigstore", "status": "over_budget", "reason": "max_pages 50 reached"},
        ],
        "gate": {"passed": False, "reason": "accuracy 0.70 < 0.80"},
    }
    path = write_report(lake, v3, lake.path("r.html"), evaluations=[run], context=context)
    text = Path(path).read_text()

    changes = _section(text, "changes")
    assert f"Against {V2}" in changes
    assert re.search(r"New sources source rows boutique 9 ", changes), changes  # 3 queries + 6 gallery
    assert "skirt 9 25.0% +25.0" in changes  # category drift, in points
    # Freshness: the 9 boutique rows are newer than anything of V2 (first seen up to T0 + 20 days).
    latest = T0 + dt.timedelta(days=20)
    assert f"9 rows (25.0%) first seen after the latest row of {V2} ({latest:%Y-%m-%d})" in changes
    # The paper's layout: one row per model and release, newest release first, 10 scores a row
    # (coarse and fine per subset and overall), then the outfit score (a dash where none).
    board = _table_rows(text, "board")
    assert [row[:2] for row in board] == [["baseline:hsv-hog-v1", v] for v in (v3, V2, V1)]
    assert all(len(row) == 13 and re.fullmatch(r"–|\d+\.\d\d", row[-1]) for row in board)
    assert all(re.fullmatch(r"\d+\.\d\d", cell) for row in board for cell in row[2:-1])
    outcomes = _section(text, "run")
    assert "Release gate (content check and judge audit): failed (accuracy 0.70 < 0.80)" in outcomes
    assert "Sites that failed: <b>atelier</b>" in outcomes and "connection refused" in outcomes
    assert "the next run resumes them): bigstore" in outcomes and "max_pages 50 reached" in outcomes
    # Autoescaped: a site's name is text, never markup.
    assert "&lt;b&gt;atelier&lt;/b&gt;" in text and "<b>atelier</b>" not in text
    assert len(re.findall(r'src="data:image/jpeg;base64,', text)) == 4 * 3 * 6  # the run's grids

    # Result dicts for the tables and the run for the grids, as the flow passes them.
    text = Path(
        write_report(
            lake, v3, lake.path("r1.html"), evaluations=[run.result()], context={"baseline_run": run}
        )
    ).read_text()
    assert len(re.findall(r'src="data:image/jpeg;base64,', text)) == 4 * 3 * 6

    # `previous_version` in the context picks the release to compare with.
    text = Path(
        write_report(lake, v3, lake.path("r2.html"), context={"previous_version": V1}, samples=4)
    ).read_text()
    assert f"Against {V1}" in _section(text, "changes")
    assert "No retrieval to show" in text  # no run given: no grids, and nothing evaluated


def test_skipped_audit_is_shown_plainly(report_lake):
    path = write_report(
        report_lake,
        V2,
        report_lake.path("r.html"),
        audit={"status": "skipped", "reason": "no judge key"},
        samples=0,
    )
    text = Path(path).read_text()
    assert "Audit skipped: no judge key" in text
    assert "No retrieval to show" in text


def test_audit_summary_from_the_flow_is_used(report_lake):
    audit = {
        "judge_model": "judge-y",
        "groups": {"material": {"correct": 9, "total": 10}},
    }
    text = Path(write_report(report_lake, V2, report_lake.path("r.html"), audit=audit, samples=0)).read_text()
    low, high = wilson(9, 10)
    assert "judge-y" in text and "material" in text and f"{100 * low:.1f}–{100 * high:.1f}%" in text
    assert "judge-x" not in text  # the table is not mixed in when the flow gives its summary
    pre = {"groups": {"colour": {"accuracy": 0.93, "low": 0.9, "high": 0.95, "n": 400}}}
    text = Path(write_report(report_lake, V2, report_lake.path("r.html"), audit=pre, samples=0)).read_text()
    assert "93.0%" in text and "90.0–95.0%" in text
    # The shape annotation.judge's summary() gives: its own intervals and confidence are kept.
    judge = {
        "status": "ok",
        "judge_model": "gpt-5.1",
        "confidence": 0.9,
        "overall": {"accuracy": 0.8, "low": 0.7, "high": 0.87, "correct": 40, "total": 50},
        "per_group": {"sleeve": {"accuracy": 0.5, "low": 0.3, "high": 0.7, "correct": 5, "total": 10}},
    }
    text = Path(write_report(report_lake, V2, report_lake.path("r.html"), audit=judge, samples=0)).read_text()
    assert "90% interval" in text and "30.0–70.0%" in text and "(all groups)" in text and "70.0–87.0%" in text


def test_report_for_a_staging_folder_and_first_release(tmp_path):
    lake = Lake(tmp_path / "lake")
    staging = lake.path("releases", ".staging-v20261201-x")
    make_release(lake, "v20261201", sample_rows(), base=staging, manifest=False)
    path = write_report(lake, "v20261201", f"{staging}/report.html", release_path=staging)
    text = Path(path).read_text()
    assert "No earlier committed release" in text
    assert "Audit skipped: no judge verdicts" in text


def test_report_cli_writes_outside_the_committed_release(report_lake, cli):
    out = subprocess.run(
        [cli, "report", V2, "--home", report_lake.home], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == report_lake.path("reports", V2, "report.html")
    assert not Path(report_lake.path("releases", V2, "report.html")).exists()


@pytest.mark.browser
def test_report_renders_in_headless_chromium(report_lake):
    chromium = shutil.which("chromium")  # the `browser` mark skips (or fails) without it: conftest
    from playwright.sync_api import sync_playwright

    run = evaluate_release_run(report_lake, V2)
    path = write_report(report_lake, V2, report_lake.path("reports", V2, "report.html"), evaluations=[run])
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(Path(path).as_uri())
            sections = ("counts", "changes", "evaluation", "leaderboard", "grids", "attributes", "sources")
            for section in (*sections, "rejections", "audit"):
                assert page.locator(f"#{section}").is_visible(), section
                assert page.locator(
                    f"#{section} table, #{section} .grid, #{section} svg"
                ).first.is_visible(), section
            grids = page.locator(".grid")
            assert grids.count() == 12
            # Every thumbnail decoded (a broken data URI has naturalWidth 0).
            widths = page.eval_on_selector_all(".grid img", "imgs => imgs.map(i => i.naturalWidth)")
            assert len(widths) == 72 and min(widths) > 0 and max(widths) <= 96
            assert page.locator("#evaluation table tbody tr").count() >= 5
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
            assert not [u for u in requests if not u.startswith(("file:", "data:"))]
        finally:
            browser.close()
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000
