"""Multi-valued groups (colour, material): what the annotator asks, stores and publishes, and how
the metrics compare them (docs/taxonomy.md "Several values in one group", docs/evaluation.md)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from annotation_fixtures import build_lake

from lookbench_live.annotation.judge import AuditItem, judge_schema
from lookbench_live.annotation.prompts import PROMPT_VERSION, grounding_schema
from lookbench_live.annotation.run import run_annotation
from lookbench_live.config import AnnotationSettings
from lookbench_live.evaluation.labels import encode_labels
from lookbench_live.evaluation.metrics import Retrieval, graded_relevance, per_query_scores
from lookbench_live.schema.strict import openai_strict_problems
from lookbench_live.schema.taxonomy import default_taxonomy
from lookbench_live.testing.loopback_server import LoopbackServer
from lookbench_live.testing.vllm_integration.server import SITECUSTOMIZE, VllmVenvMissing, find_vllm_python

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TAXONOMY = default_taxonomy()


# ----------------------------------------------------------------- the schema sent


def test_every_annotation_schema_fits_openai_strict_mode() -> None:
    for category in TAXONOMY.category_names():
        for multi in (True, False):
            schema = TAXONOMY.json_schema(category, multi=multi)
            assert openai_strict_problems(schema) == [], (category, multi)
    dress = TAXONOMY.json_schema("dress", multi=True)["properties"]
    assert dress["color"] == {
        "type": "array",
        "items": {"type": "string", "enum": [*TAXONOMY.values_for("dress", "color"), "not_visible"]},
        "minItems": 1,
        "maxItems": 2,
    }
    assert dress["main_attribute"]["type"] == "string"  # never a list
    assert openai_strict_problems(grounding_schema(TAXONOMY)) == []
    item = AuditItem("s", "", "real_studio_flat", "dress", {"color": "red|white"}, "red", "m", b"")
    assert openai_strict_problems(judge_schema(TAXONOMY, item)) == []


def test_strict_checker_refuses_what_openai_refuses() -> None:
    base = TAXONOMY.json_schema("belt", multi=True)
    unique = json.loads(json.dumps(base))
    unique["properties"]["color"]["uniqueItems"] = True
    optional = json.loads(json.dumps(base))
    optional["required"].remove("color")
    open_object = json.loads(json.dumps(base))
    del open_object["additionalProperties"]
    union = {"anyOf": [base, {"type": "string"}]}
    assert any("uniqueItems" in p for p in openai_strict_problems(unique))
    assert any("required" in p and "color" in p for p in openai_strict_problems(optional))
    assert any("additionalProperties" in p for p in openai_strict_problems(open_object))
    assert openai_strict_problems(union)
    many = {
        "type": "object",
        "properties": {"x": {"type": "string", "enum": [f"v{i}" for i in range(501)]}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert any("enum values" in p for p in openai_strict_problems(many))


def _vllm_python() -> Path:
    try:
        return find_vllm_python()
    except VllmVenvMissing as exc:
        pytest.skip(str(exc))


def test_multi_schema_compiles_in_vllm_xgrammar_and_bounds_the_list(tmp_path: Path) -> None:
    """vLLM's own feature check and xgrammar's compiler (the structured-output backend vLLM uses)."""
    python = _vllm_python()
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    schema = TAXONOMY.json_schema("belt", multi=True)
    answers = {
        "two": {"category": "belt", "color": ["black", "white"], "material": ["leather"]},
        "three": {"category": "belt", "color": ["black", "white", "red"], "material": ["leather"]},
        "string": {"category": "belt", "color": "black", "material": ["leather"]},
        "empty": {"category": "belt", "color": [], "material": ["leather"]},
    }
    for name, answer in answers.items():
        for group in TAXONOMY.groups_for("belt"):
            answer.setdefault(group, ["not_visible"] if TAXONOMY.multi(group) > 1 else "not_visible")
        answer["main_attribute"] = "leather"
        # The grammar emits properties in schema order, as the model would.
        answers[name] = {key: answer[key] for key in schema["properties"]}
    script = textwrap.dedent(
        """
        import json, sys
        import xgrammar as xgr
        from xgrammar.testing import _is_grammar_accept_string
        from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features
        schema, answers = json.load(sys.stdin)
        grammar = xgr.Grammar.from_json_schema(json.dumps(schema), strict_mode=True)
        out = {"unsupported": has_xgrammar_unsupported_json_features(schema)}
        for name, answer in answers.items():
            out[name] = _is_grammar_accept_string(grammar, json.dumps(answer))
        print(json.dumps(out))
        """
    )
    done = subprocess.run(
        [str(python), "-c", script],
        input=json.dumps([schema, answers]),
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "VLLM_TARGET_DEVICE": "cpu"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"unsupported": False, "two": True, "three": False, "string": False, "empty": False}


# ----------------------------------------------------------------- the annotator, end to end


def test_loopback_vlm_lists_are_stored_joined_and_published_one_by_one(tmp_path: Path) -> None:
    fx = build_lake(tmp_path / "lake")
    shirt = fx.shas["p1002"]  # "Striped Cotton Oxford Shirt", colour Blue
    truth = {shirt: {"color": ["blue", "white"], "material": ["cotton"], "main_attribute": "cotton"}}
    with LoopbackServer(model="m", truth=truth) as server:
        server.state.keep_bodies = True
        settings = AnnotationSettings(base_url=server.base_url, model="m", flush_rows=2, concurrency=2)
        result = run_annotation(fx.lake, settings, TAXONOMY, "r1")
        bodies = list(server.state.bodies)
    assert result.ok and not result.failed
    [row] = [
        a
        for a in fx.lake.records("annotations")
        if a.sha256 == shirt and a.task == "attributes" and a.source == "vlm"  # type: ignore[attr-defined]
    ]
    assert row.attributes["color"] == "blue|white" and row.attributes["material"] == "cotton"
    assert row.main_attribute == "cotton" and row.prompt_version.startswith(f"{PROMPT_VERSION}-")
    assert row.prior_agreement["color"] == "agree"  # the page says Blue: contained in blue|white
    sent = [
        b["response_format"]["json_schema"]["schema"]
        for b in bodies
        if "color" in b["response_format"]["json_schema"]["schema"]["properties"]
    ]
    assert sent and all(s["properties"]["color"]["type"] == "array" for s in sent)
    assert all(openai_strict_problems(s) == [] for s in sent)
    main, other = TAXONOMY.published_columns(row.category, row.attributes, row.main_attribute)
    assert main == "cotton" and "blue" in other.split(", ") and "white" in other.split(", ")


# ----------------------------------------------------------------- the metrics


def _table(rows: list[dict[str, str]]) -> pa.Table:
    return pa.table(
        {
            "category": ["top"] * len(rows),
            "main_attribute": ["cotton"] * len(rows),
            "item_ID": [f"i{i}" for i in range(len(rows))],
            "attributes": [[{"key": k, "value": v} for k, v in r.items()] for r in rows],
        }
    )


def test_metrics_compare_multi_values_by_set_and_overlap() -> None:
    query = _table([{"color": "white|red", "material": "cotton"}])
    corpus = _table(
        [
            {"color": "red|white", "material": "cotton"},  # same set, other order
            {"color": "red", "material": "cotton"},  # one colour of two
            {"color": "navy", "material": "cotton"},  # no colour shared
            {"color": "not_visible", "material": "silk"},
        ]
    )
    q, c = encode_labels([query, corpus])
    gains = graded_relevance(q, c, np.array([[0, 1, 2, 3]]))
    # V = 3 visible values (red, white, cotton).
    assert np.allclose(gains, [[3 / 3, 2 / 3, 1 / 3, 0.0]])
    assert c.strict[0] == q.strict[0] and c.strict[1] != q.strict[0]
    best_first = Retrieval(np.array([[0, 1, 2, 3]]), np.array([[4, 3, 2, 1]], np.float32))
    worst_first = Retrieval(np.array([[3, 2, 1, 0]]), np.array([[4, 3, 2, 1]], np.float32))
    best = per_query_scores(q, c, best_first, ks=(1, 5))
    worst = per_query_scores(q, c, worst_first, ks=(1, 5))
    assert best["strict_recall@1"][0] == 1.0 and best["ndcg@5"][0] == pytest.approx(1.0)
    assert worst["strict_recall@1"][0] == 0.0 and worst["ndcg@5"][0] < 1.0
    # main_attribute is one value: every row is a fine hit, as the published score counts.
    assert best["fine_recall@1"][0] == worst["fine_recall@1"][0] == 1.0
