"""lookbench_live.evaluation: score releases and write the release report.

Entry points (import them from their modules; this package imports nothing heavy, so
the CLI starts fast):
- `lookbench_live.evaluation.evaluate.evaluate_release(lake, version, *, model=None,
  embeddings=None, after=None, release_path=None, ...) -> dict`
- `lookbench_live.evaluation.report.write_report(lake, version, out_path, *,
  release_path=None, evaluations=(), audit=None, samples=4) -> str`
- `lookbench_live.evaluation.metrics`: the pure metric functions (`retrieve`, `score`).
"""
