"""Precision/recall of the pHash radius on labelled pairs drawn offline (docs/dedup.md).

    .venv/bin/python bench/dedup_radius_curve.py --per-group 5 --size 800x1000

Positives: each garment against 14 copies (resize, JPEG quality, crop, mirror, brightness,
combinations). Negatives: every two distinct garments of one kind, colour and silhouette.
`other_view`: a garment's front against its back (same product, a distinct photo).
Precision is given twice: on the pairs as drawn, and "balanced" (TPR / (TPR + FPR)), which
does not depend on how many positives were drawn per negative. The recommended radius
maximises the balanced F1.
"""

from __future__ import annotations

import argparse
import collections
import time

from lookbench_live.testing.calibration import TRANSFORMS, curve, garment_specs, labelled_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-group", type=int, default=5, help="distinct garments per kind and colour")
    parser.add_argument("--size", default="800x1000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    started = time.perf_counter()
    specs = garment_specs(args.per_group, seed=args.seed)
    pairs = list(labelled_pairs(specs, size=(width, height), fine=True))
    positives = [p for p in pairs if p.duplicate]
    negatives = [p for p in pairs if p.family == "distinct"]
    views = [p for p in pairs if p.family == "other_view"]
    print(
        f"{len(specs)} garments, {len(positives)} positive pairs, {len(negatives)} distinct pairs, "
        f"{len(views)} front/back pairs, {args.size}, {time.perf_counter() - started:.0f} s\n"
    )
    print(
        "| radius | precision | balanced precision | recall | false-positive rate | balanced F1 | front/back merged |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    best = None
    for point in curve(pairs):
        fpr = point.false_positives / len(negatives)
        balanced = point.recall / (point.recall + fpr) if point.recall + fpr else 1.0
        f1 = 2 * balanced * point.recall / (balanced + point.recall) if balanced + point.recall else 0.0
        if best is None or f1 > best[1] + 1e-12:
            best = (point.radius, f1)
        print(
            f"| {point.radius} | {point.precision:.3f} | {balanced:.3f} | {point.recall:.3f} | {fpr:.3f} | "
            f"{f1:.3f} | {point.other_view_merged / len(views):.2f} |"
        )
    print(f"\nbest balanced F1 at radius {best[0]} ({best[1]:.3f})\n")
    by_family: dict[str, list[int]] = collections.defaultdict(list)
    for p in positives:
        by_family[p.family].append(p.distance)
    radii = (0, 2, 4, 6, 8, 10, 12)
    print("| copy | " + " | ".join(f"recall@{r}" for r in radii) + " | max distance |")
    print("|---|" + "---:|" * (len(radii) + 1))
    for name in TRANSFORMS:
        d = by_family[name]
        print(
            f"| {name} | "
            + " | ".join(f"{sum(x <= r for x in d) / len(d):.2f}" for r in radii)
            + f" | {max(d)} |"
        )
    same_owner_table(pairs)


def same_owner_table(pairs: list) -> None:
    """Within one product: the 256-bit pHash check that must pass besides the 64-bit radius."""
    copies = [p for p in pairs if p.duplicate and not p.family.startswith("crop")]
    views = [p for p in pairs if p.family == "other_view"]
    print("\nsame owner (256-bit pHash; copies without crops vs the front/back view):\n")
    print("| fine radius | copies confirmed | front/back merged |")
    print("|---:|---:|---:|")
    for r in (0, 2, 4, 6, 8, 10, 12, 16):
        kept = sum(p.fine_distance <= r for p in copies) / len(copies)
        merged = sum(p.fine_distance <= r for p in views) / len(views)
        print(f"| {r} | {kept:.2f} | {merged:.2f} |")


if __name__ == "__main__":
    main()
