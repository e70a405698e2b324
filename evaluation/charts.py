"""Inline SVG charts of the report, drawn in Python (no script, no plotting library).

Each function returns `markupsafe.Markup` of one `<svg>`: every text that comes from data (model,
category and release names) is escaped here, since the template passes the markup through. The
charts scale to their container (`width="100%"` and a viewBox), so none is wider than the page;
names too long for a label are shortened with "…" and given whole in the element's `<title>`
(the browser's tooltip). Series keep one colour in every chart (`colour(i)`), so one legend in
HTML, where long names wrap, serves them all.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

# Tableau 10 and two more; a 13th series repeats the first colour with a hollow marker.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f3a93",
    "#8c564b",
)
WIDTH = 1000  # viewBox units; the SVG is drawn at its container's width
HISTOGRAM_WIDTH = 600  # drawn in half the page: fewer units, so its text stays legible
MAX_BAR = 48  # a bar never wider than this, so one bin or one model is not a slab
DAY_BINS = 31  # up to this many days: one bar per day
BINS = 24  # beyond: this many bars of whole days each


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def hollow(i: int) -> bool:
    """Whether series `i` is drawn hollow (its colour is a repeat)."""
    return i >= len(PALETTE)


def _short(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: its start and its end around "…" (names that share a
    long prefix, like numbered categories, differ at the end)."""
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 2
    return text[: limit - 1 - tail] + "…" + text[len(text) - tail :]


def _svg(height: float, label: str, body: list[str], width: float = WIDTH) -> Markup:
    return Markup(
        f'<svg class="chart" role="img" aria-label="{escape(label)}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet">{"".join(body)}</svg>'
    )


def _y_axis(left: float, right: float, top: float, bottom: float) -> list[str]:
    """Grid lines at 0, 25, 50, 75 and 100 percent."""
    out = []
    for tick in (0, 25, 50, 75, 100):
        y = bottom - (bottom - top) * tick / 100
        out.append(
            f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="grid-line"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>'
        )
    return out


def grouped_bars(
    groups: Sequence[str],
    series: Sequence[str],
    values: Mapping[tuple[str, str], float | None],
    *,
    label: str,
    group_titles: Mapping[str, str] | None = None,
    index: Mapping[str, int] | None = None,
) -> Markup:
    """Bars of `values[(series, group)]` (percent, 0–100), one cluster per group, one colour per
    series (`index[name]`: its colour number, default its position); a missing value is drawn as
    a dash on the axis."""
    top, bottom, left, right = 16.0, 250.0, 40.0, WIDTH - 10.0
    band = (right - left) / max(1, len(groups))
    bar = min(MAX_BAR, band * 0.8 / max(1, len(series)))
    body = _y_axis(left, right, top, bottom)
    for g, group in enumerate(groups):
        start = left + g * band + (band - bar * len(series)) / 2
        for n, name in enumerate(series):
            s = (index or {}).get(name, n)
            value = values.get((name, group))
            x = start + n * bar
            tip = f"{name} · {(group_titles or {}).get(group, group)}: " + (
                "–" if value is None else f"{value:.2f}"
            )
            if value is None:
                body.append(
                    f'<line x1="{x + 1:.1f}" x2="{x + bar - 1:.1f}" y1="{bottom - 2}" y2="{bottom - 2}" '
                    f'stroke="{colour(s)}" stroke-width="2"><title>{escape(tip)}</title></line>'
                )
                continue
            h = (bottom - top) * max(0.0, min(100.0, value)) / 100
            fill = "white" if hollow(s) else colour(s)
            body.append(
                f'<rect x="{x + 0.5:.1f}" y="{bottom - h:.1f}" width="{max(1.0, bar - 1):.1f}" height="{h:.1f}" '
                f'fill="{fill}" stroke="{colour(s)}"><title>{escape(tip)}</title></rect>'
            )
        title = (group_titles or {}).get(group, group)
        body.append(
            f'<text x="{left + g * band + band / 2:.1f}" y="{bottom + 18}" text-anchor="middle">'
            f"<title>{escape(title)}</title>{escape(_short(title, max(6, int(band / 7))))}</text>"
        )
    return _svg(bottom + 28, label, body)


def lines(
    releases: Sequence[str],
    series: Sequence[str],
    values: Mapping[tuple[str, str], float | None],
    *,
    label: str,
    index: Mapping[str, int] | None = None,
) -> Markup:
    """Each series' `values[(series, release)]` (percent) across `releases` (in order), points
    joined where consecutive releases both have one."""
    top, bottom, left, right = 16.0, 250.0, 40.0, WIDTH - 30.0
    step = (right - left) / max(1, len(releases) - 1)

    def x_of(i: int) -> float:
        return (left + right) / 2 if len(releases) == 1 else left + i * step

    body = _y_axis(left, right, top, bottom)
    every = max(1, math.ceil(len(releases) / 12))  # at most about 12 release labels
    for i, release in enumerate(releases):
        if i % every == 0 or i == len(releases) - 1:
            x, anchor = x_of(i), "middle"
            if len(releases) > 1 and i == len(releases) - 1:
                x, anchor = right + 20, "end"  # the last label ends at the edge, not past it
            elif len(releases) > 1 and i == 0:
                x, anchor = left - 10, "start"
            body.append(
                f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="{anchor}">{escape(_short(release, 14))}</text>'
            )
    for n, name in enumerate(series):
        s = (index or {}).get(name, n)
        points = [(i, values.get((name, r))) for i, r in enumerate(releases)]
        run: list[str] = []
        for i, value in [*points, (len(releases), None)]:
            if value is None:
                if len(run) > 1:
                    body.append(
                        f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour(s)}" stroke-width="2"/>'
                    )
                run = []
                continue
            run.append(f"{x_of(i):.1f},{bottom - (bottom - top) * max(0.0, min(100.0, value)) / 100:.1f}")
        for i, value in points:
            if value is None:
                continue
            y = bottom - (bottom - top) * max(0.0, min(100.0, value)) / 100
            fill = "white" if hollow(s) else colour(s)
            tip = f"{name} · {releases[i]}: {value:.2f}"
            body.append(
                f'<circle cx="{x_of(i):.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{colour(s)}" stroke-width="2">'
                f"<title>{escape(tip)}</title></circle>"
            )
    return _svg(bottom + 28, label, body)


def dot_plot(
    rows: Sequence[str],
    series: Sequence[str],
    values: Mapping[tuple[str, str], float | None],
    *,
    label: str,
    notes: Mapping[str, str] | None = None,
    index: Mapping[str, int] | None = None,
) -> Markup:
    """One line per row (a category), a dot per series at its value (percent): readable with many
    categories and many models, where grouped bars are not. `notes[row]` is added to the row's tooltip."""
    row_h, top, left, right = 20.0, 22.0, 230.0, WIDTH - 20.0
    bottom = top + row_h * len(rows)
    body = []
    for tick in (0, 25, 50, 75, 100):
        x = left + (right - left) * tick / 100
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{bottom:.1f}" class="grid-line"/>'
            f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle">{tick}</text>'
        )
    for r, name in enumerate(rows):
        y = top + row_h * r + row_h / 2
        tip = name + (f" ({notes[name]})" if notes and name in notes else "")
        body.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end"><title>{escape(tip)}</title>'
            f"{escape(_short(name, 30))}</text>"
            f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="row-line"/>'
        )
        for n, model in enumerate(series):
            s = (index or {}).get(model, n)
            value = values.get((model, name))
            if value is None:
                continue
            x = left + (right - left) * max(0.0, min(100.0, value)) / 100
            fill = "white" if hollow(s) else colour(s)
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" fill-opacity="0.85" stroke="{colour(s)}">'
                f"<title>{escape(f'{model} · {name}: {value:.2f}')}</title></circle>"
            )
    return _svg(bottom + 6, label, body)


def _day_bins(days: Sequence[dt.date]) -> tuple[dt.date, int, int]:
    """(first day, days per bin, bins) covering `days`: one bin a day up to `DAY_BINS` days."""
    lo, hi = min(days), max(days)
    span = (hi - lo).days + 1
    width = 1 if span <= DAY_BINS else math.ceil(span / BINS)
    return lo, width, math.ceil(span / width)


def histogram(moments: Sequence[dt.datetime], *, label: str) -> Markup | None:
    """Rows per calendar day (UTC) of `moments`, or per bin of whole days over a long span.

    Bars are at most `MAX_BAR` units wide and centred, so a release whose rows share one date is
    one labelled bar with its count, not a sliver at the edge; each bar's tooltip names its days
    and count. None when there is nothing to draw."""
    if not moments:
        return None
    days = [(m.astimezone(dt.UTC) if m.tzinfo else m).date() for m in moments]
    lo, width, bins = _day_bins(days)
    counts = [0] * bins
    for day in days:
        counts[(day - lo).days // width] += 1
    top, bottom, left, right = 20.0, 150.0, 40.0, HISTOGRAM_WIDTH - 10.0
    slot = (right - left) / bins
    bar = min(MAX_BAR, slot * 0.85)
    peak = max(counts)
    body = [
        f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" class="grid-line"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{peak}</text>',
        f'<text x="{left - 6}" y="{bottom + 4}" text-anchor="end">0</text>',
    ]
    # Few bars: each gets its date (and count); many: the first, the last and about 6 between.
    every = 1 if bins <= 6 else math.ceil(bins / 5)
    for i, count in enumerate(counts):
        start = lo + dt.timedelta(days=i * width)
        end = start + dt.timedelta(days=width - 1)
        days_text = f"{start:%Y-%m-%d}" if width == 1 else f"{start:%Y-%m-%d} – {end:%Y-%m-%d}"
        centre = left + slot * i + slot / 2
        h = (bottom - top) * count / peak if peak else 0.0
        body.append(
            f'<rect x="{centre - bar / 2:.1f}" y="{bottom - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
            f'class="bar"><title>{days_text}: {count} rows</title></rect>'
        )
        if bins <= 12 and count:
            body.append(
                f'<text x="{centre:.1f}" y="{bottom - h - 4:.1f}" text-anchor="middle">{count}</text>'
            )
        if i % every == 0 or i == bins - 1:
            # A date near an edge is anchored to it rather than cut off by it.
            x, anchor = centre, "middle"
            if centre > right - 40:
                x, anchor = right, "end"
            elif centre < left + 40 and bins > 1:
                x, anchor = left, "start"
            body.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="{anchor}">{start:%Y-%m-%d}</text>')
    unit = "day" if width == 1 else f"{width} days"
    body.append(f'<text x="{left}" y="{bottom + 36}">rows first seen per {unit} (UTC)</text>')
    return _svg(bottom + 44, label, body, HISTOGRAM_WIDTH)
