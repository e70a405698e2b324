"""Optional second stage: image embeddings with a cosine threshold, for what hashes miss.

Off unless `dedup.embedding_model` names a transformers image model (a local folder, or a
hub id already in the local cache: the pipeline runs with `HF_HUB_OFFLINE=1`). CLIP-style
models embed with `get_image_features`; other vision models (ViT, DINOv2) with the pooled
output, else the first token. It only turns `kept` decisions of the hash stage into
`near_in_run` / `near_earlier_release` drops, in the same canonical order.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np
from PIL import Image

from lookbench_live.config import DedupSettings
from lookbench_live.schema.hashing import hamming
from lookbench_live.schema.records import DedupDecision
from lookbench_live.warehouse.lake import Lake

if TYPE_CHECKING:
    from lookbench_live.dedup.decide import _Node


class EmbeddingModelError(RuntimeError):
    """The configured embedding model cannot be loaded; the message names it."""


class ImageEmbedder:
    """Unit-length embeddings of images with one transformers vision model, on CPU."""

    def __init__(self, model: str, *, batch_size: int = 16):
        try:
            import torch
            from transformers import AutoImageProcessor, AutoModel
        except ImportError as exc:  # pragma: no cover - both are dependencies
            raise EmbeddingModelError(f"the embedding stage needs torch and transformers: {exc}") from exc
        try:
            self.processor = AutoImageProcessor.from_pretrained(model)
            self.model = AutoModel.from_pretrained(model).eval()
        except (OSError, ValueError) as exc:
            raise EmbeddingModelError(
                f"dedup.embedding_model {model!r} cannot be loaded offline ({exc}); give a local folder "
                "with the model and its preprocessor_config.json, or unset it"
            ) from exc
        self._torch = torch
        self.batch_size = batch_size

    def embed(self, images: Sequence[Image.Image]) -> np.ndarray:
        """`(n, d)` float32 rows of unit length."""
        torch = self._torch
        chunks: list[np.ndarray] = []
        for start in range(0, len(images), self.batch_size):
            batch = [img.convert("RGB") for img in images[start : start + self.batch_size]]
            inputs = self.processor(images=batch, return_tensors="pt")
            with torch.inference_mode():
                features = self._features(inputs)
            chunks.append(features.float().cpu().numpy())
        if not chunks:
            return np.empty((0, 0), dtype=np.float32)
        vectors = np.ascontiguousarray(np.concatenate(chunks), dtype=np.float32)
        faiss.normalize_L2(vectors)
        return vectors

    def _features(self, inputs: Any) -> Any:
        if hasattr(self.model, "get_image_features"):
            out = self.model.get_image_features(pixel_values=inputs["pixel_values"])
            return out if not hasattr(out, "pooler_output") else out.pooler_output
        out = self.model(pixel_values=inputs["pixel_values"])
        pooled = getattr(out, "pooler_output", None)
        return pooled if pooled is not None else out.last_hidden_state[:, 0]


def embedding_stage(
    lake: Lake,
    settings: DedupSettings,
    nodes: list[_Node],
    first_pending: int,
    kept_nodes: set[int],
    records: list[DedupDecision],
    run_id: str,
) -> list[DedupDecision]:
    """Return `records` (one per pending node, in order) with embedding duplicates dropped.

    Only images whose bytes are in the lake take part; `kept_nodes` is updated in place.
    """
    assert settings.embedding_model is not None
    embedder = ImageEmbedder(settings.embedding_model, batch_size=settings.embedding_batch_size)
    ids = [i for i in sorted(kept_nodes) if lake.has_image(nodes[i].image.sha256)]
    if not any(i >= first_pending for i in ids):
        return records
    pictures = []
    for i in ids:
        pictures.append(Image.open(io.BytesIO(lake.get_image(nodes[i].image.sha256))))
    vectors = embedder.embed(pictures)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    lims, sims, labels = index.range_search(vectors, settings.embedding_threshold)
    out = list(records)
    for row, node_id in enumerate(ids):
        if node_id < first_pending:
            continue
        matches = []
        for k in range(int(lims[row]), int(lims[row + 1])):
            other = ids[int(labels[k])]
            if other != node_id and other in kept_nodes and (other < first_pending or other < node_id):
                matches.append((-float(sims[k]), nodes[other].image.rank(), other))
        released = [m for m in matches if nodes[m[2]].release is not None]
        if not matches:
            continue
        similarity, _, other = min(released or matches)
        target, own = nodes[other], nodes[node_id].image
        kept_nodes.discard(node_id)
        a, b = own.hashes, target.image.hashes
        distance = None
        if a is not None and b is not None:
            distance = min(hamming(a.phash, b.phash), hamming(a.phash, b.phash_mirror))
        out[node_id - first_pending] = out[node_id - first_pending].model_copy(
            update={
                "decision": "dropped",
                "reason": "near_earlier_release" if target.release else "near_in_run",
                "matched_sha256": target.image.sha256,
                "matched_ref": target.release or f"run:{target.run_id or run_id}",
                "distance": distance,
                "similarity": round(-similarity, 6),
            }
        )
    return out
