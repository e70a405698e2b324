"""A look page's hotspots as pixel boxes of the stored (upright) photo: the one home of that rule.

The extractor (`scrapers/extract/looks.py`) records each hotspot as the page states it:
`{"ref", "bbox": [x0, y0, x1, y1] | "point": [x, y], "unit": "percent" | "px"}`. Percent values
are fractions of the photo as displayed, which is the stored photo since ingestion applies the
EXIF orientation (`ingest/orientation.py`); they are scaled by its width and height.
Pixel values are taken as pixels of the stored photo. An entry without `unit` is pixels (rows
written before the unit was recorded).

A point hotspot says where an item is, not how big it is: it becomes a square of
`POINT_BOX_SHARE` of the photo's shorter side centred on the point (clipped to the photo), the
documented default box fraction (`docs/release.md`, box rules).

Refused, each with a reason the caller records: percent values outside 0–100, pixel values
outside the photo, degenerate boxes (x0 ≥ x1 or y0 ≥ y1), unknown units, malformed entries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

POINT_BOX_SHARE = 0.3
UNITS = ("px", "percent")

Box = tuple[int, int, int, int]
Spot = tuple[str | None, Box]


class HotspotError(ValueError):
    """One hotspot cannot be a box of this photo; the message says why."""


def box_around_point(x: float, y: float, width: int, height: int, share: float = POINT_BOX_SHARE) -> Box:
    """A square of side `share` × the shorter photo side centred on a point, clipped to the photo."""
    half = max(1, round(share * min(width, height) / 2))
    cx, cy = round(x), round(y)
    return (max(0, cx - half), max(0, cy - half), min(width, cx + half), min(height, cy + half))


def _numbers(values: Any, count: int, name: str) -> list[float]:
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) != count:
        raise HotspotError(f"{name} must be {count} numbers, got {values!r}")
    numbers = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise HotspotError(f"{name} must be {count} numbers, got {values!r}")
        numbers.append(float(value))
    return numbers


def _to_pixels(values: list[float], unit: str, width: int, height: int) -> list[float]:
    """x, y, x, y… in the stated unit as pixels of the photo, refusing values off the photo."""
    if unit == "percent":
        if not all(0 <= v <= 100 for v in values):
            raise HotspotError(f"percent values {values} are outside 0–100")
        return [v * (width if i % 2 == 0 else height) / 100 for i, v in enumerate(values)]
    if not all(0 <= v <= (width if i % 2 == 0 else height) for i, v in enumerate(values)):
        raise HotspotError(f"pixel values {values} are outside the {width}x{height} photo")
    return values


def hotspot_box(entry: dict[str, Any], width: int, height: int) -> Box:
    """One hotspot entry as a pixel box of the `width` × `height` photo, or `HotspotError`."""
    unit = entry.get("unit", "px")
    if unit not in UNITS:
        raise HotspotError(f"unit {unit!r} is not one of {list(UNITS)}")
    if entry.get("bbox") is not None:
        x0, y0, x1, y1 = (
            round(v) for v in _to_pixels(_numbers(entry["bbox"], 4, "bbox"), unit, width, height)
        )
        if x0 >= x1 or y0 >= y1:
            raise HotspotError(f"bbox {entry['bbox']} ({unit}) is degenerate on the {width}x{height} photo")
        return (x0, y0, x1, y1)
    if entry.get("point") is not None:
        x, y = _to_pixels(_numbers(entry["point"], 2, "point"), unit, width, height)
        return box_around_point(x, y, width, height)
    raise HotspotError("the hotspot has neither bbox nor point")


def parse_hotspots(
    boxes_json: str | None, width: int | None, height: int | None
) -> tuple[list[Spot], list[str]]:
    """A look's stated hotspots as pixel boxes, and why each unusable one was left out."""
    if not boxes_json:
        return [], []
    try:
        entries = json.loads(boxes_json)
    except json.JSONDecodeError as exc:
        return [], [f"boxes_json is not JSON: {exc}"]
    if not isinstance(entries, list) or not width or not height:
        return [], ["boxes_json is not a list, or the photo size is unknown"]
    spots: list[Spot] = []
    problems: list[str] = []
    for entry in entries:
        if not isinstance(entry, dict):
            problems.append(f"hotspot {entry!r} is not an object")
            continue
        try:
            box = hotspot_box(entry, width, height)
        except HotspotError as exc:
            problems.append(f"hotspot {entry!r}: {exc}")
            continue
        ref = entry.get("ref")
        spots.append((str(ref) if ref is not None else None, box))
    return spots, problems
