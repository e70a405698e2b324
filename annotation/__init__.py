"""lookbench_live.annotation: the VLM annotator, the metadata prior and the judge audit.

The flow calls `run_annotation(lake, settings, taxonomy, run_id)` and
`run_audit(lake, judge_settings, taxonomy, items, run_id, seed=0)`; see docs/annotation.md.
Names are imported lazily, so that `lookbench_live.testing.vllm_integration` stays importable in the
vLLM server's own venv, which has none of the pipeline's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AnnotationError": "run",
    "AnnotationResult": "run",
    "run_annotation": "run",
    "AuditItem": "judge",
    "AuditSummary": "judge",
    "Interval": "judge",
    "run_audit": "judge",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
