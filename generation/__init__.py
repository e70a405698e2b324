"""lookbench_live.generation: AIGen-Studio and AIGen-StreetLook synthesis with diffusers.

The flow calls `run_generation(lake, settings, taxonomy, run_id, products=...)` with
`ConditioningProduct`s; both are importable from here without importing torch
(the heavy modules load on first use).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConditioningProduct", "GenerationResult", "run_generation"]


def __getattr__(name: str) -> Any:
    if name == "ConditioningProduct":
        from lookbench_live.generation.plan import ConditioningProduct

        return ConditioningProduct
    if name in ("GenerationResult", "run_generation"):
        from lookbench_live.generation import synthesis

        return getattr(synthesis, name)
    raise AttributeError(f"module 'lookbench_live.generation' has no attribute {name!r}")
