"""The dataset card (Hugging Face README with `configs:`) and the Croissant 1.1 file of a release."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.release import NOISE, RELEASE_SCHEMA, SUBSETS, hf_yaml_features

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

# The project's contact page; a release passes its own (`info["contact"]`, crawl.contact_url).
DEFAULT_CONTACT = "https://github.com/lookbench-live/lookbench-live"
TERMS_NAME = "lookbench-live-research-terms"

# Every column of a release: its Croissant type and what it means (the card and Croissant say the
# same). A column added to RELEASE_SCHEMA without an entry here still gets a type from its Arrow
# type and a pointer to docs/release.md, so the files never disagree with the data.
COLUMNS: dict[str, tuple[str, str]] = {
    "image": (
        "sc:ImageObject",
        "The query crop or gallery product image, encoded (JPEG/PNG/WEBP bytes); Hugging Face Image "
        "struct {bytes, path}.",
    ),
    "raw_image": (
        "sc:ImageObject",
        "The full photo `image` was cut from (same struct); equal to `image` when there is no crop.",
    ),
    "category": (
        "sc:Text",
        "Garment category in LookBench's published names (dress, coat, pants, bag, shoe, blouse...); "
        "`noise data` for distractors.",
    ),
    "main_attribute": ("sc:Text", "The single defining visible attribute value (e.g. leather, sequin)."),
    "other_attributes": (
        "sc:Text",
        "The other visible attribute values, comma-separated, in taxonomy order.",
    ),
    "bbox": (
        "sc:Integer",
        "Crop box of `image` inside `raw_image`: [x0, y0, x1, y1] in pixels, x1 and y1 exclusive; "
        "null means the whole image.",
    ),
    "bbox_source": (
        "sc:Text",
        "What located `bbox`: `hotspot` (the look page's own hotspot), `vlm` (the annotating model's "
        "grounding), `layout` (where the generator pasted the garment into a composed AIGen-StreetLook "
        "scene), `product_photo` (a product photo's own item); null when `bbox` is null.",
    ),
    "item_ID": ("sc:Text", "Product identity: a query's gallery matches share its item_ID."),
    "task": ("sc:Text", "The retrieval task of the row's subset."),
    "difficulty": (
        "sc:Text",
        "The subset's level as the published configs give it: easy (real_studio_flat), medium "
        "(aigen_studio), hard (real_streetlook, aigen_streetlook); empty for noise.",
    ),
    "taxonomy_category": (
        "sc:Text",
        "Our taxonomy's category (e.g. `sneakers`), finer than the published `category` (`shoe`); "
        "the true category of a noise row.",
    ),
    "difficulty_estimate": (
        "sc:Text",
        "Our finer per-row estimate (easy, medium, hard): for crops the crop's share of the photo, "
        "otherwise the number of gallery images of the item.",
    ),
    "sha256": ("sc:Text", "sha256 of the `image` bytes."),
    "raw_sha256": ("sc:Text", "sha256 of the `raw_image` bytes."),
    "first_seen_at": (
        "sc:Date",
        "When the pipeline first saw the item (UTC); the release window is defined on it, for "
        "contamination-aware evaluation.",
    ),
    "published_at": ("sc:Date", "When the source says it published the item, if it says (UTC)."),
    "freshness_evidence": (
        "sc:Text",
        "What shows the item is new in this release's window: `platform_published` (the platform's "
        "publication date is in the window), `first_seen_after_baseline` (undated, first seen by a "
        "crawl after the site's first, baseline, crawl) or `generated` (made by this pipeline in the window).",
    ),
    "evidence_at": ("sc:Date", "The moment that evidence dates the item (UTC)."),
    "source": ("sc:Text", "The crawled site's configured name; `generation` for AI-generated rows."),
    "source_url": (
        "sc:URL",
        "Where the image was fetched (`generated://<generation id>` for AI-generated rows); the page is in "
        "`provenance`.",
    ),
    "taxonomy_version": ("sc:Text", "Version of the attribute taxonomy the labels use."),
    "annotation_model": ("sc:Text", "The model (or metadata prior) that produced the labels."),
    "attributes": (
        "sc:Text",
        "Every attribute group and its value as key/value pairs (`not_visible` when unseen; `a|b` "
        "for up to two values of colour or material).",
    ),
    "provenance": (
        "sc:Text",
        "JSON object: `kind` (product, look or generation) with the page URL and platform, or the "
        "generation's model, prompt, seed and settings; an image-conditioned generation also names "
        "each conditioning photo (`conditioning`: product key and sha256) and its IP-Adapter and scale.",
    ),
}

# Terms for scraped retail photos: the images are not ours to license.
TERMS = (
    "Research use only. The product photos were collected from public retail pages and remain the "
    "property of their owners; they are included only so that the benchmark can be evaluated. Do not "
    "redistribute the images, or use them for any purpose other than evaluating and comparing image "
    "retrieval systems (no training of commercial models, no republication, no identification of "
    "people). Generated images (AIGen subsets) follow the licence of the model that made them. "
    "Labels, metadata and code: see the project. Owners who want an item removed: contact {contact}; "
    "removed items are kept out of every later release and export."
)


def _arrow_type(column: str) -> str:
    import pyarrow as pa

    kind = RELEASE_SCHEMA.field(column).type
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return "sc:Date"
    if pa.types.is_integer(kind):
        return "sc:Integer"
    if pa.types.is_floating(kind):
        return "sc:Float"
    if pa.types.is_boolean(kind):
        return "sc:Boolean"
    return "sc:Text"


def column_doc(column: str) -> tuple[str, str]:
    """(Croissant data type, description) of a release column."""
    return COLUMNS.get(column) or (_arrow_type(column), f"See docs/release.md ({column}).")


def _splits() -> list[tuple[str, str]]:
    return [(s, split) for s in SUBSETS for split in ("query", "gallery")] + [(NOISE, "gallery")]


def freshness_section(info: dict[str, Any]) -> list[str]:
    """The freshness rules as users read them, with what this release held back."""
    rules = info.get("freshness_rules")
    if not rules:
        return []
    held = info.get("held_back") or {}
    lines = [
        "",
        f"## Freshness ({rules})",
        "",
        "Every row is new in the window, and its `freshness_evidence` column says why:",
        "",
        "- `platform_published`: the retailer's own publication date lies in the window. An item the "
        "platform dates before the window is never released as new, whenever we first saw it.",
        "- `first_seen_after_baseline`: an undated item first seen by a crawl after the site's first "
        "(baseline) crawl. Undated items already present at the baseline are never released as new.",
        "- `generated`: an AI-generated image made in the window.",
        "- A sitemap `lastmod` or HTTP `Last-Modified` date records a change, not a creation: it "
        "is weak evidence and never enough on its own.",
        "- The first release's window starts one cadence before its as-of day, never at the "
        "beginning of time.",
        "",
        "Held back (first seen in the window without evidence): "
        + (", ".join(f"{reason} {n}" for reason, n in sorted(held.items())) or "none")
        + ".",
    ]
    return lines


BOX_RULES = (
    "A `bbox` comes from what located the item, named in `bbox_source`: a look page's hotspot",
    "(`hotspot`; percent hotspots scaled by the photo's size, a point hotspot becomes a square around",
    "the point sized by a fixed share of the photo), the annotating model's grounding (`vlm`), the",
    "position a composed AIGen-StreetLook scene's garment was pasted at (`layout`: its pixels are that",
    "garment's), or a product photo's own item (`product_photo`). An item nothing located is held back",
    "(`box_not_located`), never given a guessed box. Boxes are pixels of the photo as a browser shows",
    "it: EXIF orientation is applied before anything is hashed, boxed or cropped. `bbox` null means",
    "the whole image.",
)


def box_rules(info: dict[str, Any]) -> list[str]:
    """What the card says about `bbox` (the same for every release: every box was located)."""
    return list(BOX_RULES)


def _yaml_features(indent: str) -> list[str]:
    """`dataset_info.features` lines: every column in order, `image` and `raw_image` as `image`
    (datasets then decodes them to PIL, as the files' own `huggingface` metadata says)."""
    lines = []
    for feature in hf_yaml_features(RELEASE_SCHEMA):
        lines.append(f"{indent}- name: {feature['name']}")
        for key, value in feature.items():
            if key == "name":
                continue
            if isinstance(value, list):  # a list of structs: one entry per field
                lines.append(f"{indent}  {key}:")
                for sub in value:
                    lines += [f"{indent}  - name: {sub['name']}", f"{indent}    dtype: {sub['dtype']}"]
            else:
                lines.append(f"{indent}  {key}: {value}")
    return lines


def _moment(text: str) -> str:
    """An ISO moment as the card prints it: the date alone at midnight UTC."""
    moment = parse_moment(text)
    assert moment is not None, "a window bound is never empty text"
    moment = moment.astimezone(dt.UTC)
    if moment.time() == dt.time(0):
        return moment.date().isoformat()
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def window_text(window: dict[str, Any]) -> str:
    """The release window in words; an open side is said, never printed as `None`."""
    start, end = window.get("start"), window.get("end")
    if start and end:
        return f"from {_moment(start)} (inclusive) to {_moment(end)} (exclusive)"
    if end:
        return f"before {_moment(end)} (no start: everything not released earlier)"
    if start:
        return f"from {_moment(start)} (inclusive), no end"
    return "at any time (no window: everything not released earlier)"


def dataset_card(info: dict[str, Any]) -> str:
    """A Hugging Face dataset card whose `configs:` map each subset to its files."""
    contact = info.get("contact") or DEFAULT_CONTACT
    lines = [
        "---",
        "license: other",
        f"license_name: {TERMS_NAME}",
        "pretty_name: LookBench live " + info["version"],
        "task_categories:",
        "- image-feature-extraction",
        "tags:",
        "- fashion",
        "- image-retrieval",
        "- benchmark",
        "configs:",
    ]
    for subset in (*SUBSETS, NOISE):
        lines.append(f"- config_name: {subset}")
        lines.append("  data_files:")
        for s, split in _splits():
            if s == subset:
                lines.append(f"  - split: {split}")
                lines.append(f"    path: {subset}/{split}.parquet")
    lines.append("dataset_info:")
    for subset in (*SUBSETS, NOISE):
        lines += [f"- config_name: {subset}", "  features:", *_yaml_features("  ")]
    lines += ["---", "", f"# LookBench live, release {info['version']}", ""]
    window = info["window"]
    lines += [
        "A LookBench-compatible fashion image-retrieval release built by lookbench-live.",
        "",
        f"- Items first seen {window_text(window)}, UTC ({window['rule']}).",
        *(
            [
                f"- Supersedes release {info['supersedes']}: a correction of it (same window), which is withdrawn."
            ]
            if info.get("supersedes")
            else []
        ),
        f"- Taxonomy version: {info['taxonomy_version']}.",
        f"- Annotation: {', '.join(info['annotation_models']) or 'none'}"
        f" (sources: {', '.join(info['annotation_sources']) or 'none'}).",
        "- Label rules: "
        + (
            f"{info['label_rules']} ({info.get('labels_corrected', 0)} rows corrected by the judge)."
            if info.get("label_rules")
            else "none applied: the annotations are published as they are."
        ),
        *_evidence_lines(info.get("evidence_checks")),
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
    lines += freshness_section(info)
    lines += [
        "",
        "## Columns",
        "",
        "The nine published LookBench columns come first, in their order; the rest are ours (the published",
        "release carries no time stamps or sources).",
        "",
        "| column | type | meaning |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{name}` | {column_doc(name)[0].removeprefix('sc:')} | {column_doc(name)[1].replace('|', chr(92) + '|')} |"
        for name in RELEASE_SCHEMA.names
    ]
    lines += [
        "",
        "Scoring: corpus = the subset's gallery plus `noise`; coarse hit = same `category`; fine hit = same",
        "`category` and `main_attribute`; overall = mean over subsets weighted by query count.",
        "",
        "## Boxes",
        "",
        *box_rules(info),
        "",
        "## Terms of use",
        "",
        TERMS.format(contact=contact),
        "",
        "## Takedown",
        "",
        f"To have an item removed, contact {contact} with its page URL, `source_url` or `sha256`. The item is",
        "added to the pipeline's takedown list: it is left out of every later release, and a published",
        "release holding it is replaced by a correction (see Versions) and no longer exported.",
        "",
        "## Versions",
        "",
        f"A published version never changes: the files of {info['version']} and their checksums in",
        "`manifest.json` stay as they are. A correction (a takedown, a fixed label) is a new version",
        "`vYYYYMMDD.N`, sorting after `vYYYYMMDD`, whose card names the version it supersedes; the",
        "superseded version is withdrawn. A withdrawn version (a legal takedown, a wrong gate) leaves",
        "`latest`, version ranges and exports; its withdrawal is recorded with its reason.",
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
        fields = [_field(f"{subset}-{split}", file_id, column) for column in RELEASE_SCHEMA.names]
        record_sets.append(
            {
                "@type": "cr:RecordSet",
                "@id": f"{subset}-{split}",
                "name": f"{subset}-{split}",
                "field": fields,
            }
        )
    contact = info.get("contact") or DEFAULT_CONTACT
    doc = {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "name": f"lookbench-live-{info['version']}",
        "description": "A live, time-stamped, LookBench-compatible fashion image-retrieval benchmark release.",
        "conformsTo": "http://mlcommons.org/croissant/1.1",
        "license": f"{TERMS_NAME}: research use only, no redistribution of the images (see the card)",
        "url": "https://arxiv.org/abs/2601.14706",
        # semantic version from the date: v20261201 -> 2026.12.1
        "version": f"{int(info['version'][1:5])}.{int(info['version'][5:7])}.{int(info['version'][7:9])}",
        "datePublished": f"{info['version'][1:5]}-{info['version'][5:7]}-{info['version'][7:9]}",
        "isLiveDataset": True,
        "citeAs": "LookBench (arXiv 2601.14706)",
        "usageInfo": TERMS.format(contact=contact),
        "rai:dataCollection": (
            "Product and look pages of configured retail sites, crawled politely (robots.txt, opt-out "
            "headers and meta tags honoured); AI-generated studio and street images; labels by a "
            "vision-language model audited by a judge model."
        ),
        "rai:dataCollectionType": ["Web Scraping", "Machine-generated"],
        "rai:dataUseCases": "Evaluating and comparing fashion image retrieval models (research only).",
        "rai:personalSensitiveInformation": (
            "Photos may show fashion models' faces and bodies; no names or other personal data are kept."
        ),
        "rai:dataLimitations": (
            "Labels are machine-made (audited on a sample); the site mix decides category and style coverage."
        ),
        "distribution": distribution,
        "recordSet": record_sets,
    }
    return json.dumps(doc, indent=2, sort_keys=False)


def _field(record_set: str, file_id: str, column: str) -> dict[str, Any]:
    """The Croissant field of one column; images and the key/value list read their struct parts."""
    data_type, description = column_doc(column)
    source: dict[str, Any] = {"fileObject": {"@id": file_id}, "extract": {"column": column}}
    field: dict[str, Any] = {
        "@type": "cr:Field",
        "@id": f"{record_set}/{column}",
        "name": column,
        "description": description,
        "dataType": data_type,
    }
    if data_type == "sc:ImageObject":  # the Hugging Face Image struct: the bytes are the image
        source["transform"] = {"jsonPath": "bytes"}
    if column == "bbox":
        field["repeated"] = True
    if column == "attributes":
        field["repeated"] = True
        field["subField"] = [
            {
                "@type": "cr:Field",
                "@id": f"{record_set}/{column}/{part}",
                "name": part,
                "dataType": "sc:Text",
                "source": {**source, "transform": {"jsonPath": part}},
            }
            for part in ("key", "value")
        ]
    field["source"] = source
    return field


def _evidence_lines(evidence: dict[str, Any] | None) -> list[str]:
    """The card's statement of which evidence checks ran (docs/release.md, "Label rules")."""
    if not evidence:
        return []
    photo = evidence.get("photo_type") or {}
    lines = [
        f"- Studio queries: every real_studio_flat query passed the photo-type check ({photo.get('method')}, "
        f"flat border share >= {photo.get('threshold')}); {photo.get('not_studio', 0)} photo(s) that are not "
        "studio or flat-lay shots stayed gallery photos."
    ]
    category = evidence.get("generated_category") or {}
    if category.get("ran") is False:
        lines.append(f"- Generated images: the VLM category check did not run: {category.get('note')}.")
    elif category:
        lines.append(
            "- Generated images: each was checked by the VLM for its requested category "
            f"({', '.join(category.get('methods') or []) or 'no image checked'})."
        )
    look = evidence.get("conditioned_look") or {}
    if look:
        lines.append(
            "- Conditioned looks: each was compared with its product's photos "
            f"({', '.join(look.get('methods') or []) or 'none in this release'})."
        )
    held = evidence.get("held_back") or {}
    if held:
        lines.append("- Held back by these checks: " + ", ".join(f"{k} {v}" for k, v in held.items()) + ".")
    return lines
