"""Choose and score the evidence checks' thresholds on labelled sets drawn offline (issue 22 §4).

    .venv/bin/python bench/evidence_thresholds.py [--embedder MODEL] [--json]

Draws the labelled sets of `lookbench_live.testing.evidence_calibration` (photo type: studio and
flat-lay shots vs scenes; conditioned look: a product's photo vs a look of the same garment or of
another garment of its kind), chooses each threshold on the calibration split only (the highest
recall at the stated precision), and prints precision and recall on the calibration and the
held-out split. The defaults in `core/config.py` (`STUDIO_MIN_FLAT_BORDER`,
`BASELINE_LOOK_MIN_SIMILARITY`) and the table in docs/release.md come from this script;
`tests/warehouse/test_evidence_checks.py` scores the held-out split against them. `--embedder` calibrates
`evidence.conditioned_min_similarity` for another embedder (an `evaluation.models` spec).
"""

from __future__ import annotations

import argparse
import json
import time

from lookbench_live.evaluation.embedders import load_embedder
from lookbench_live.evaluation.look_check import foreground
from lookbench_live.testing import evidence_calibration as ec
from lookbench_live.warehouse.photo_type import PHOTO_TYPE_METHOD, flat_border_share

PHOTO_MIN_PRECISION = (
    0.97  # a scene passed as a studio query is a wrong row; a studio photo refused stays gallery
)
LOOK_MIN_PRECISION = 0.9  # a look passed that shows another product is a wrong row; one refused is held back


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="baseline")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    photo_cal = ec.photo_type_set(ec.CALIBRATION_SEEDS, flat_border_share)
    photo_held = ec.photo_type_set(ec.HELD_OUT_SEEDS, flat_border_share)
    photo = ec.choose_threshold(photo_cal, min_precision=PHOTO_MIN_PRECISION)
    embedder = load_embedder(args.embedder)
    look_cal = ec.look_set(ec.CALIBRATION_SEEDS, embedder.embed, foreground)
    look_held = ec.look_set(ec.HELD_OUT_SEEDS, embedder.embed, foreground)
    look = ec.choose_threshold(look_cal, min_precision=LOOK_MIN_PRECISION)
    out = {
        "photo_type": {
            "method": PHOTO_TYPE_METHOD,
            "min_precision": PHOTO_MIN_PRECISION,
            "calibration": _as_dict(photo),
            "held_out": _as_dict(ec.score_at(photo_held, photo.threshold)),
        },
        "conditioned_look": {
            "method": embedder.name,
            "min_precision": LOOK_MIN_PRECISION,
            "calibration": _as_dict(look),
            "held_out": _as_dict(ec.score_at(look_held, look.threshold)),
        },
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print("| check | method | threshold | split | precision | recall | positives | negatives |")
    print("|---|---|---|---|---|---|---|---|")
    for name, entry in out.items():
        if not isinstance(entry, dict):
            continue
        for split in ("calibration", "held_out"):
            s = entry[split]
            print(
                f"| {name} | {entry['method']} | {s['threshold']} | {split} | {s['precision']} | "
                f"{s['recall']} | {s['positives']} | {s['negatives']} |"
            )
    print(f"({out['seconds']} s)")


def _as_dict(scored: ec.Scored) -> dict[str, float]:
    return {
        "threshold": scored.threshold,
        "precision": scored.precision,
        "recall": scored.recall,
        "positives": scored.positives,
        "negatives": scored.negatives,
    }


if __name__ == "__main__":
    main()
