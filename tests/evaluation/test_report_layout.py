"""The report with many models, long names and many categories: the paper's leaderboard, charts,
release files and load snippet, escaping; and in Chromium at 1400 px, nothing wider than the page."""

from __future__ import annotations

import datetime as dt
import html
import re
import shutil
from pathlib import Path

import pytest
from evaluation_fixtures import make_release, sample_rows
from report_fixtures import MODELS, RELEASES, XSS_CATEGORY, XSS_MODEL, crowded_lake

from lookbench_live.evaluation import charts
from lookbench_live.evaluation.report import write_report

ARTIFACTS = Path(__file__).parents[1] / "artifacts"


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    lake, version, runs = crowded_lake(tmp_path_factory.mktemp("crowded") / "lake")
    path = write_report(lake, version, lake.path("reports", version, "report.html"), evaluations=runs)
    return lake, version, runs, path


def _board(text: str) -> list[list[str]]:
    body = re.search(r'<table class="board">.*?<tbody>(.*?)</tbody>', text, re.S)
    assert body
    return [
        [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        ]
        for tr in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
    ]


def test_paper_leaderboard_charts_and_escaping(crowded):
    *_, runs, path = crowded
    text = Path(path).read_text()
    board = _board(text)
    # One row per model and release, newest release first: 14 runs of this release (the baseline
    # and MODELS), then the stored evaluations of the two earlier ones.
    assert len(board) == len(runs) + 2 * len(MODELS)
    assert [r[1] for r in board] == [RELEASES[2]] * len(runs) + [RELEASES[1]] * 13 + [RELEASES[0]] * 13
    by_key = {(r[0], r[1]): r for r in board}
    # Stored scores, in the paper's order: per subset coarse then fine, overall, outfit Fine R@1
    # on Real StreetLook (present in the v20261001 evaluations only; older ones show a dash).
    assert by_key[(MODELS[1], RELEASES[1])][2:] == ["44.00", "28.00"] * 5 + ["11.00"]
    assert by_key[(MODELS[1], RELEASES[0])][2:] == ["44.00", "25.00"] * 5 + ["–"]
    assert [r[0] for r in board if r[1] == RELEASES[1]][:2] == [MODELS[12], MODELS[11]]  # best first
    # Five charts drawn in Python: subsets × models, models across releases, per category, and
    # the freshness histograms of this and the previous release (the sources histogram: a sixth).
    assert text.count('<svg class="chart"') == 6 and "<script" not in text
    # Names from the lake and the config are text everywhere, the SVG included.
    assert XSS_MODEL not in text and XSS_CATEGORY not in text
    assert "&lt;script&gt;alert(" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    # Per-category recall: every category, models in tables of at most 8 model columns.
    categories = re.search(r'<section id="categories">(.*?)</section>', text, re.S).group(1)
    assert categories.count('<table class="wrap">') == 2
    assert "category-with-a-rather-long-name-number-28" in categories


def test_release_files_checksums_and_snippet(crowded, tmp_path):
    lake, version, _, path = crowded
    text = Path(path).read_text()
    files = html.unescape(re.search(r'<section id="files">(.*?)</section>', text, re.S).group(1))
    # Links relative to the report (reports/<version>/), so they work wherever the lake is opened.
    assert f'href="../../releases/{version}/manifest.json"' in files
    assert "README.md (not in this release)" in re.sub(r"<[^>]+>", "", files)  # the test release has no card
    assert "verified" in files and "real_studio_flat/query.parquet" in files
    assert f'load_dataset("{lake.path("releases", version)}", "real_studio_flat")' in files
    assert f"lookbench-live evaluate {version} --model" in files

    # A tampered release (the same rows written again: only the checksums tell): the report says
    # so and names the file.
    import pyarrow.parquet as pq

    target = Path(lake.path("releases", RELEASES[0], "aigen_studio", "gallery.parquet"))
    pq.write_table(pq.read_table(target), target, compression="gzip")
    tampered = Path(write_report(lake, RELEASES[0], str(tmp_path / "t.html"), samples=0)).read_text()
    assert "verification failed" in tampered and "aigen_studio/gallery.parquet was altered" in tampered

    # A staging folder (what the flow writes before commit): the checksums it is given, pending.
    staging = lake.path("releases", ".staging-v20261201-x")
    make_release(lake, "v20261201", sample_rows(), base=staging, manifest=False)
    files_given = {"noise/gallery.parquet": {"sha256": "ab" * 32, "size": 10, "rows": 8}}
    staged = Path(
        write_report(
            lake,
            "v20261201",
            f"{staging}/report.html",
            release_path=staging,
            samples=0,
            context={"files": files_given},
        )
    ).read_text()
    assert "not yet verified" in staged and "ab" * 32 in staged and 'href="manifest.json"' in staged


def test_a_histogram_of_one_date_is_one_labelled_bar():
    day = dt.datetime(2026, 10, 1, 9, tzinfo=dt.UTC)
    svg = str(charts.histogram([day, day + dt.timedelta(hours=3)] * 5, label="x"))
    bars = re.findall(r'<rect [^>]*width="([\d.]+)"', svg)
    assert bars == [f"{charts.MAX_BAR:.1f}"]  # one bar, of a bar's width, not a sliver or a slab
    assert ">2026-10-01<" in svg and ">10<" in svg and "2026-10-01: 10 rows" in svg
    # A long span: whole-day bins, at most BINS of them.
    spread = [day + dt.timedelta(days=k) for k in range(200)]
    assert len(re.findall(r"<rect ", str(charts.histogram(spread, label="x")))) <= charts.BINS


@pytest.mark.browser
def test_crowded_report_fits_1400_px_in_chromium(crowded):
    chromium = shutil.which("chromium")  # the `browser` mark skips (or fails) without it: conftest
    from playwright.sync_api import sync_playwright

    *_, path = crowded
    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []
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
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(Path(path).as_uri())
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            wide = page.evaluate(
                """() => [...document.querySelectorAll('body *')]
                    .filter(e => e.getBoundingClientRect().right > window.innerWidth)
                    .map(e => e.tagName + ' ' + (e.textContent || '').slice(0, 40))"""
            )
            assert wide == []
            assert page.locator("#leaderboard table.board tbody tr").count() == 40
            assert page.locator("svg.chart").count() == 6
            # The markup in names stayed text: no element it would have made, nothing run.
            assert page.locator('script, img[src="x"]').count() == 0 and dialogs == []
            # The leaderboard and its charts only: a full-page shot of this page costs about 3 s.
            page.locator("#leaderboard").screenshot(path=str(ARTIFACTS / "report_crowded_leaderboard.png"))
        finally:
            browser.close()
