"""lookbench_live.evaluation: score releases and write the release report.

Entry points (import them from their modules; this package imports nothing heavy, so
the CLI starts fast):
- `lookbench_live.evaluation.evaluate.evaluate_release(lake, version, *, model=None,
  embeddings=None, after=None, release_path=None, ...) -> dict`
- `lookbench_live.evaluation.evaluate.evaluate_release_run(...)` -> EvaluationRun (the same,
  keeping the top-K the report's grids show)
- `lookbench_live.evaluation.report.write_report(lake, version, path, *, release_path=None,
  evaluations=None, audit=None, context=None, samples=4) -> str` (never evaluates)
- `lookbench_live.evaluation.metrics`: the pure metric functions (`retrieve`, `score`).
- `lookbench_live.evaluation.leaderboard.board_rows(evaluations, *, releases=None, leave_out=())`
  and `paper_table(rows)`: the leaderboard the `leaderboard` command and the report print.
"""
