"""Score a release: embed (or take submitted embeddings), retrieve, compute every metric.

`evaluate_release` is what the flow and `lookbench-live evaluate` call. Per subset the
corpus is the subset's gallery followed by the noise gallery (that row order breaks
ties); `overall` is the mean over all queries of all subsets, i.e. the subsets' means
weighted by their query counts. Results are appended to the lake's `evaluations`
table (idempotent by release, model, subset and `after`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lookbench_live.evaluation.baseline import BASELINE_NAME
from lookbench_live.evaluation.embedders import ImageEmbedder, embedder_name, load_embedder
from lookbench_live.evaluation.labels import encode_labels
from lookbench_live.evaluation.metrics import (
    DEFAULT_KS,
    K_MAX,
    LabelCodes,
    Retrieval,
    normalize_rows,
    per_query_scores,
    retrieve,
)
from lookbench_live.evaluation.outfit import OUTFIT_SUBSETS, look_keys, outfit_scores
from lookbench_live.evaluation.release_data import ReleaseData, iter_images, load_release, query_moment
from lookbench_live.evaluation.vectors import (
    EmbeddingsError,
    Vectors,
    load_cache,
    load_submitted,
    save_cache,
)
from lookbench_live.schema.records import Evaluation
from lookbench_live.warehouse.lake import Lake

EMBED_BATCH = 64  # images decoded and embedded at once (bounded memory)


@dataclass(slots=True)
class SubsetRun:
    """One subset's retrieval: labels, corpus shas (gallery then noise), top-K, per-query scores."""

    name: str
    query_sha: list[str]
    corpus_sha: list[str]
    query_labels: LabelCodes
    corpus_labels: LabelCodes
    retrieval: Retrieval
    per_query: dict[str, np.ndarray]
    query_rows: pa.Table
    corpus_rows: pa.Table


@dataclass(slots=True)
class EvaluationRun:
    release: str
    model: str
    after: dt.date | None
    subsets: dict[str, SubsetRun] = field(default_factory=dict)
    corpus_sizes: dict[str, int] = field(default_factory=dict)

    def result(self) -> dict[str, Any]:
        """The `--json` shape: values in percent; a subset with no query has null metrics. The
        StreetLook subsets add outfit-level recall (`outfit.outfit_scores`); `overall` does not."""
        names = metric_names()
        out: dict[str, Any] = {
            "release": self.release,
            "model": self.model,
            "after": self.after.isoformat() if self.after else None,
            "subsets": {},
            "overall": {},
        }
        pooled: dict[str, list[np.ndarray]] = {n: [] for n in names}
        for name, run in self.subsets.items():
            n = len(run.query_sha)
            entry: dict[str, Any] = {"queries": n, "corpus": self.corpus_sizes[name]}
            for metric in names:
                values = run.per_query[metric]
                entry[metric] = round(float(values.mean()) * 100.0, 4) if n else None
                pooled[metric].append(values)
            if name in OUTFIT_SUBSETS:
                entry.update(outfit_scores(look_keys(run.query_rows), run.per_query))
            out["subsets"][name] = entry
        total = sum(len(r.query_sha) for r in self.subsets.values())
        overall: dict[str, Any] = {"queries": total, "corpus": None}
        for metric in names:
            values = np.concatenate(pooled[metric]) if pooled[metric] else np.zeros(0)
            overall[metric] = round(float(values.mean()) * 100.0, 4) if total else None
        out["overall"] = overall
        return out


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    names = []
    for family in ("coarse", "fine", "strict", "item"):
        names += [f"{family}_recall@{k}" for k in ks]
    names += [f"ndcg@{k}" for k in ks]
    names.append("mrr")
    return names


def embed_release(
    lake: Lake,
    data: ReleaseData,
    embedder: ImageEmbedder,
    *,
    use_cache: bool = True,
) -> Vectors:
    """sha256 -> embedding of every image of the release, through the (release, model) cache."""
    required = data.all_sha256()
    vectors = load_cache(lake, data.version, embedder.name) if use_cache else Vectors.of({})
    missing = [s for s in required if s not in vectors]
    if missing:
        vectors = vectors.merged(embed_images(lake, data, embedder, missing))
        if use_cache:
            save_cache(lake, data.version, embedder.name, vectors)
    return vectors


def embed_images(lake: Lake, data: ReleaseData, embedder: ImageEmbedder, wanted: Sequence[str]) -> Vectors:
    """sha256 -> embedding of the `wanted` images of the release, `EMBED_BATCH` at a time, written
    into one float32 matrix (allocated at the first batch, when the width is known)."""
    wanted = list(dict.fromkeys(wanted))
    shas: list[str] = []
    seen: set[str] = set()
    matrix: np.ndarray | None = None
    pending_sha: list[str] = []
    pending_bytes: list[bytes] = []

    def flush() -> None:
        nonlocal matrix
        rows = np.asarray(embedder.embed(pending_bytes), np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(pending_sha):
            raise EmbeddingsError(
                f"model {embedder.name} returned {rows.shape[0] if rows.ndim else 0} rows "
                f"for {len(pending_sha)} images"
            )
        if matrix is None:
            matrix = np.empty((len(wanted), rows.shape[1]), np.float32)
        if rows.shape[1] != matrix.shape[1]:
            raise EmbeddingsError(
                f"model {embedder.name} returned width {rows.shape[1]}, earlier batches {matrix.shape[1]}"
            )
        matrix[len(shas) : len(shas) + len(rows)] = rows
        shas.extend(pending_sha)
        pending_sha.clear()
        pending_bytes.clear()

    for sha, image in iter_images(lake, data, wanted):
        if sha in seen:  # iter_images yields each once; this keeps the matrix bound regardless
            continue
        seen.add(sha)
        pending_sha.append(sha)
        pending_bytes.append(image)
        if len(pending_sha) >= EMBED_BATCH:
            flush()
    if pending_sha:
        flush()
    absent = [s for s in wanted if s not in seen]
    if absent:
        raise EmbeddingsError(
            f"image {absent[0]} of release {data.version} has no bytes in the release files"
        )
    if matrix is None:
        return Vectors.of({})
    return Vectors(shas, matrix if len(shas) == len(matrix) else matrix[: len(shas)].copy())


def _rows(vectors: Vectors, shas: Sequence[str], source: str) -> np.ndarray:
    """Row numbers of `shas` in `vectors.matrix` (an absent image is named, never a KeyError)."""
    try:
        return vectors.rows(shas)
    except KeyError as exc:
        raise EmbeddingsError(f"{source}: no embedding for image {exc.args[0]}") from None


def _keep_after(table: pa.Table, after: dt.date | None) -> np.ndarray:
    if after is None:
        return np.arange(table.num_rows)
    moments = query_moment(table)
    return np.array(
        [i for i, m in enumerate(moments) if m is not None and m.astimezone(dt.UTC).date() > after],
        dtype=np.int64,
    )


def run_evaluation(
    lake: Lake,
    version: str,
    *,
    model: str | None = None,
    embeddings: str | None = None,
    after: dt.date | None = None,
    release_path: str | None = None,
    trust_remote_code: bool = False,
    batch_size: int = 32,
    chunk_size: int = 65536,
    device: str = "cpu",
    subsets: Sequence[str] | None = None,
) -> EvaluationRun:
    """Everything `evaluate_release` computes, kept in memory (the report reuses the top-K)."""
    data = load_release(lake, version, release_path)
    if embeddings is not None:
        vectors = load_submitted(embeddings, data.all_sha256())
        name = model or f"submitted:{embeddings.rsplit('/', 1)[-1]}"
        source = f"embeddings file {embeddings}"
    else:
        name = embedder_name(model)
        vectors = load_cache(lake, data.version, name)
        if any(s not in vectors for s in data.all_sha256()):
            # Loaded only when something is left to embed: after sharded embedding (the flow on
            # Dask) or a finished earlier run, scoring needs no model, GPU or weights here.
            embedder = load_embedder(
                model, trust_remote_code=trust_remote_code, batch_size=batch_size, device=device
            )
            vectors = embed_release(lake, data, embedder)
        source = f"model {name}"
    run = EvaluationRun(release=data.version, model=name, after=after)
    # One float32 matrix for the whole release, L2-normalised in place (row by row, so the
    # same numbers as normalising each subset's copy); subsets index it by row number.
    vectors = Vectors.of(vectors)
    if not vectors.matrix.flags.writeable or not vectors.matrix.flags.owndata:
        vectors = Vectors(vectors.shas, vectors.matrix.copy())
    normalize_rows(vectors.matrix)
    wanted = [s for s in data.subsets() if subsets is None or s in subsets]
    noise = data.noise
    # One shared vocabulary for every split, so codes compare across query and corpus.
    tables: list[pa.Table] = [noise]
    for s in wanted:
        gallery = data.gallery(s)
        tables += [data.query(s), gallery if gallery is not None else noise.slice(0, 0)]  # type: ignore[list-item]
    codes = encode_labels(tables)
    noise_codes = codes[0]
    noise_sha = noise.column("sha256").to_pylist()
    noise_rows = _rows(vectors, noise_sha, source)
    for i, s in enumerate(wanted):
        q_table, g_table = tables[1 + 2 * i], tables[2 + 2 * i]
        q_codes, g_codes = codes[1 + 2 * i], codes[2 + 2 * i]
        keep = _keep_after(q_table, after)
        q_table = q_table.take(pa.array(keep, pa.int64()))
        q_codes = q_codes.take(keep)
        q_sha = q_table.column("sha256").to_pylist()
        g_sha = g_table.column("sha256").to_pylist()
        c_sha = g_sha + noise_sha
        c_codes = _concat_codes(g_codes, noise_codes)
        q_emb = vectors.matrix[_rows(vectors, q_sha, source)]
        c_rows = np.concatenate([_rows(vectors, g_sha, source), noise_rows])
        retrieval = retrieve(q_emb, vectors.matrix, K_MAX, corpus_chunk=chunk_size, corpus_rows=c_rows)
        del q_emb
        per_query = per_query_scores(q_codes, c_codes, retrieval)
        run.subsets[s] = SubsetRun(
            name=s,
            query_sha=q_sha,
            corpus_sha=c_sha,
            query_labels=q_codes,
            corpus_labels=c_codes,
            retrieval=retrieval,
            per_query=per_query,
            query_rows=q_table,
            corpus_rows=pa.concat_tables([g_table, noise.cast(g_table.schema)])
            if g_table.num_rows
            else noise,
        )
        run.corpus_sizes[s] = len(c_sha)
    return run


def _concat_codes(a: LabelCodes, b: LabelCodes) -> LabelCodes:
    return LabelCodes(
        np.concatenate([a.category, b.category]),
        np.concatenate([a.fine, b.fine]),
        np.concatenate([a.strict, b.strict]),
        np.concatenate([a.item, b.item]),
        np.concatenate([a.attr_matrix(), b.attr_matrix()]),
        a.overlap if a.overlap is not None else b.overlap,  # one encode_labels call: the same table
    )


def evaluation_records(result: dict[str, Any]) -> list[Evaluation]:
    """`evaluations` rows of a result: one per subset plus `overall`; metrics as text (percentages
    and means with 4 decimals, counts such as `outfit_looks` as integers)."""
    after = result.get("after") or ""
    rows = []
    for subset, entry in [*result["subsets"].items(), ("overall", result["overall"])]:
        metrics = {
            k: str(v) if isinstance(v, int) else f"{v:.4f}"
            for k, v in entry.items()
            if k not in ("queries", "corpus") and v is not None
        }
        rows.append(
            Evaluation(
                release=result["release"],
                model=result["model"],
                subset=subset,
                after=after,
                queries=int(entry["queries"]),
                corpus=int(entry.get("corpus") or 0),
                metrics=metrics,
            )
        )
    return rows


def evaluate_release_run(
    lake: Lake,
    version: str,
    *,
    model: str | None = None,
    embeddings: str | None = None,
    after: dt.date | None = None,
    release_path: str | None = None,
    trust_remote_code: bool = False,
    batch_size: int = 32,
    chunk_size: int = 65536,
    device: str = "cpu",
    write: bool = True,
) -> EvaluationRun:
    """`evaluate_release`, returning the whole run (its `result()` is the dict): what the flow passes
    to `write_report`, whose sample grids show the run's top-K without evaluating again."""
    run = run_evaluation(
        lake,
        version,
        model=model,
        embeddings=embeddings,
        after=after,
        release_path=release_path,
        trust_remote_code=trust_remote_code,
        batch_size=batch_size,
        chunk_size=chunk_size,
        device=device,
    )
    if write:
        lake.append(evaluation_records(run.result()))
    return run


def evaluate_release(
    lake: Lake,
    version: str,
    *,
    model: str | None = None,
    embeddings: str | None = None,
    after: dt.date | None = None,
    release_path: str | None = None,
    trust_remote_code: bool = False,
    batch_size: int = 32,
    chunk_size: int = 65536,
    device: str = "cpu",
    write: bool = True,
) -> dict[str, Any]:
    """Score release `version` ("latest" allowed unless `release_path` is given).

    `model=None` and no `embeddings`: the weight-free baseline. `embeddings`: a Parquet
    file (sha256, embedding) covering every image; `model` then only names the result.
    `after`: keep queries first seen or published strictly after that UTC date.
    `release_path`: a staging folder (before commit) holding the release files.
    Returns `{"release", "model", "after", "subsets": {name: {...}}, "overall": {...}}`
    with every metric in percent, and (when `write`) appends `Evaluation` rows.
    """
    return evaluate_release_run(
        lake,
        version,
        model=model,
        embeddings=embeddings,
        after=after,
        release_path=release_path,
        trust_remote_code=trust_remote_code,
        batch_size=batch_size,
        chunk_size=chunk_size,
        device=device,
        write=write,
    ).result()


__all__ = [
    "BASELINE_NAME",
    "EvaluationRun",
    "evaluate_release",
    "evaluate_release_run",
    "metric_names",
    "run_evaluation",
]
