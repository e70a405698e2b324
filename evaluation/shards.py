"""Embedding a release's images in shards (one task each, on Dask workers that may own a GPU).

The flow's evaluation splits a model's work in two: `embed_shard` embeds the images whose
sha256 falls in shard `index` of `count` and writes them to a part file beside the model's
embedding cache; `merge_shards` folds the parts into the cache. Scoring then runs once in the
flow (`run_evaluation` finds every vector in the cache and loads no model), so the scores are
those of an unsharded run: every image's vector comes from the same model, and the baseline's
(`baseline:hsv-hog-v1`) depends on the image alone.

A part is written atomically and only when its shard is complete, so a killed task leaves no
part and its rerun embeds the shard again; a finished part is kept until the merge, so a rerun
of the step skips it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq

from lookbench_live.evaluation.embedders import load_embedder
from lookbench_live.evaluation.evaluate import embed_images
from lookbench_live.evaluation.release_data import load_release
from lookbench_live.evaluation.vectors import Vectors, cache_path, load_cache, read_vectors, save_cache
from lookbench_live.warehouse.lake import Lake


@dataclass(frozen=True, slots=True)
class EmbedShard:
    """What one shard did: the model's name (results are filed under it) and counts."""

    model: str
    shard: str
    wanted: int  # images of the shard not in the model's cache when it started
    embedded: int  # images embedded by this call (0 when a finished part was found)


def shard_of(sha256: str, count: int) -> int:
    """The shard of an image: its sha256's first 32 bits modulo `count` (uniform, stable)."""
    return int(sha256[:8], 16) % count


def part_path(lake: Lake, version: str, model: str, index: int, count: int) -> str:
    return cache_path(lake, version, model).removesuffix(".parquet") + f".part-{index}-of-{count}.parquet"


def embed_shard(
    lake: Lake,
    version: str,
    model: str | None,
    *,
    index: int,
    count: int,
    release_path: str | None = None,
    trust_remote_code: bool = False,
    batch_size: int = 32,
    device: str = "cpu",
) -> EmbedShard:
    """Embed shard `index` of `count` of release `version`'s images with `model` (None: baseline)."""
    data = load_release(lake, version, release_path)
    embedder = load_embedder(model, trust_remote_code=trust_remote_code, batch_size=batch_size, device=device)
    cached = load_cache(lake, data.version, embedder.name)
    wanted = [s for s in data.all_sha256() if shard_of(s, count) == index and s not in cached]
    path = part_path(lake, data.version, embedder.name, index, count)
    label = f"{index}/{count}"
    if not wanted or set(wanted) <= set(_read_part(lake, path)):
        return EmbedShard(embedder.name, label, len(wanted), 0)
    vectors = embed_images(lake, data, embedder, wanted)
    save_cache(lake, data.version, embedder.name, vectors, path=path)
    return EmbedShard(embedder.name, label, len(wanted), len(vectors))


def merge_shards(lake: Lake, version: str, model: str, count: int) -> int:
    """Fold the `count` part files of `model` into its embedding cache (then remove them);
    returns the cache's number of vectors. A missing part adds nothing: scoring embeds what
    is still absent in the flow, so a lost part costs time, never a wrong score."""
    vectors = load_cache(lake, version, model)
    paths = [part_path(lake, version, model, i, count) for i in range(count)]
    added = 0
    for path in paths:
        part = _read_part(lake, path)
        added += len(part)
        vectors = vectors.merged(part)
    if added:
        save_cache(lake, version, model, vectors)
    for path in paths:
        if lake.fs.exists(path):
            lake.fs.rm(path)
    return len(vectors)


def _read_part(lake: Lake, path: str) -> Vectors:
    if not lake.fs.exists(path):
        return Vectors.of({})
    with lake.fs.open(path, "rb") as handle:
        table = pq.read_table(handle)
    try:
        return read_vectors(table, f"embedding part {path}")
    except ValueError:  # a bad part is embedded again, never trusted
        return Vectors.of({})
