"""The dataset card (Hugging Face README with `configs:`) and the Croissant 1.1 file of a release."""

from __future__ import annotations

import json
from typing import Any

from lookbench_live.schema.release import NOISE, RELEASE_SCHEMA, SUBSETS

CROISSANT_CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "samplingRate": "cr:samplingRate",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}

# Croissant data types of the release's scalar columns (structs and lists are described in prose).
_SCALAR_TYPES = {
    "category": "sc:Text",
    "main_attribute": "sc:Text",
    "other_attributes": "sc:Text",
    "item_ID": "sc:Text",
    "task": "sc:Text",
    "difficulty": "sc:Text",
    "sha256": "sc:Text",
    "raw_sha256": "sc:Text",
    "first_seen_at": "sc:Date",
    "published_at": "sc:Date",
    "source": "sc:Text",
    "source_url": "sc:URL",
    "taxonomy_version": "sc:Text",
    "annotation_model": "sc:Text",
    "provenance": "sc:Text",
}


def _splits() -> list[tuple[str, str]]:
    return [(s, split) for s in SUBSETS for split in ("query", "gallery")] + [(NOISE, "gallery")]


def dataset_card(info: dict[str, Any]) -> str:
    """A Hugging Face dataset card whose `configs:` map each subset to its files."""
    lines = ["---", "license: apache-2.0", "pretty_name: LookBench live " + info["version"], "configs:"]
    for subset in (*SUBSETS, NOISE):
        lines.append(f"- config_name: {subset}")
        lines.append("  data_files:")
        for s, split in _splits():
            if s == subset:
                lines.append(f"  - split: {split}")
                lines.append(f"    path: {subset}/{split}.parquet")
    lines += ["---", "", f"# LookBench live, release {info['version']}", ""]
    window = info["window"]
    lines += [
        "A LookBench-compatible fashion image-retrieval release built by lookbench-live.",
        "",
        f"- Items first seen in the window {window['start']} .. {window['end']} ({window['rule']}).",
        f"- Taxonomy version: {info['taxonomy_version']}.",
        f"- Annotation: {', '.join(info['annotation_models']) or 'none'}"
        f" (sources: {', '.join(info['annotation_sources']) or 'none'}).",
        f"- Generation models: {', '.join(info['generation_models']) or 'none'}"
        + (
            " — a tiny random local pipeline (embedded default), not a real model."
            if info["generation_tiny_local"]
            else ""
        ),
        "",
        "| file | rows |",
        "|---|---|",
    ]
    lines += [f"| {rel} | {n} |" for rel, n in info["rows"].items()]
    lines += [
        "",
        "Columns: the nine published LookBench columns (`image`, `raw_image`, `category`, `main_attribute`,",
        "`other_attributes`, `bbox`, `item_ID`, `task`, `difficulty`), then `sha256`, `raw_sha256`, `first_seen_at`,",
        "`published_at`, `source`, `source_url`, `taxonomy_version`, `annotation_model`, `attributes`, `provenance`.",
        "`bbox` is `[x0, y0, x1, y1]` in pixels of `raw_image` (x1, y1 exclusive); null means the whole image.",
        "Scoring: corpus = the subset's gallery plus `noise`; coarse hit = same `category`; fine hit = same",
        "`category` and `main_attribute`; overall = mean over subsets weighted by query count.",
        "",
    ]
    return "\n".join(lines)


def croissant_json(info: dict[str, Any], files: dict[str, dict[str, Any]]) -> str:
    """Croissant 1.1 metadata: one FileObject per Parquet file, one RecordSet per file."""
    distribution = []
    record_sets = []
    for subset, split in _splits():
        rel = f"{subset}/{split}.parquet"
        file_id = f"{subset}-{split}-file"
        distribution.append(
            {
                "@type": "cr:FileObject",
                "@id": file_id,
                "name": file_id,
                "contentUrl": rel,
                "encodingFormat": "application/x-parquet",
                "sha256": files[rel]["sha256"],
            }
        )
        fields = []
        for column in RELEASE_SCHEMA.names:
            if column not in _SCALAR_TYPES:
                continue
            fields.append(
                {
                    "@type": "cr:Field",
                    "@id": f"{subset}-{split}/{column}",
                    "name": column,
                    "dataType": _SCALAR_TYPES[column],
                    "source": {"fileObject": {"@id": file_id}, "extract": {"column": column}},
                }
            )
        record_sets.append(
            {
                "@type": "cr:RecordSet",
                "@id": f"{subset}-{split}",
                "name": f"{subset}-{split}",
                "field": fields,
            }
        )
    doc = {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "name": f"lookbench-live-{info['version']}",
        "description": "A live, time-stamped, LookBench-compatible fashion image-retrieval benchmark release.",
        "conformsTo": "http://mlcommons.org/croissant/1.1",
        "license": "https://www.apache.org/licenses/LICENSE-2.0",
        "url": "https://arxiv.org/abs/2601.14706",
        # semantic version from the date: v20261201 -> 2026.12.1
        "version": f"{int(info['version'][1:5])}.{int(info['version'][5:7])}.{int(info['version'][7:9])}",
        "datePublished": f"{info['version'][1:5]}-{info['version'][5:7]}-{info['version'][7:9]}",
        "isLiveDataset": True,
        "citeAs": "LookBench (arXiv 2601.14706)",
        "distribution": distribution,
        "recordSet": record_sets,
    }
    return json.dumps(doc, indent=2, sort_keys=False)
