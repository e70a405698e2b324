"""The taxonomy data file, its loader, its JSON Schemas and the `taxonomy` CLI command."""

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
from typer.testing import CliRunner

from lookbench_live.sample_store.catalog import build_catalog
from lookbench_live.schema.cli import register
from lookbench_live.schema.taxonomy import (
    NOT_VISIBLE,
    Taxonomy,
    TaxonomyError,
    default_taxonomy,
    load,
    load_taxonomy,
    split_values,
    structure,
    values_match,
)

PACKAGED = Path(__file__).resolve().parents[2] / "schema" / "taxonomy.json"


@pytest.fixture(scope="module")
def tax() -> Taxonomy:
    return default_taxonomy()


def valid_payload(tax: Taxonomy, category: str) -> dict[str, str]:
    """A payload with the first applicable value of every group; main_attribute = the first group's value."""
    payload = {"category": category}
    for group in tax.groups_for(category):
        payload[group] = tax.values_for(category, group)[0]
    payload["main_attribute"] = payload[tax.groups_for(category)[0]]
    return payload


# -- content ------------------------------------------------------------------------------------


def test_counts_meet_the_issue(tax: Taxonomy) -> None:
    values = {v for group in tax.groups for v in tax.values(group)}
    assert len(tax.categories) >= 20
    assert len(tax.groups) >= 12
    assert len(values) >= 100
    assert NOT_VISIBLE not in values
    assert tax.version == "2026.12.1"


def test_required_categories_and_groups_exist(tax: Taxonomy) -> None:
    for name in [
        "dress",
        "coat",
        "pants",
        "skirt",
        "shirt",
        "t-shirt",
        "sweater",
        "jacket",
        "shorts",
        "jumpsuit",
    ]:
        assert tax.categories[name].super_category == "apparel"
    for name in ["sneakers", "boots", "heels", "sandals"]:
        assert tax.categories[name].super_category == "shoes"
    assert tax.categories["bag"].super_category == "bags"
    for name in ["hat", "scarf", "belt", "sunglasses"]:
        assert tax.categories[name].super_category == "accessories"
    for group in [
        "neckline",
        "collar",
        "sleeve_length",
        "sleeve_style",
        "silhouette",
        "garment_length",
        "closure",
    ]:
        assert group in tax.groups
    for group in ["waistline", "rise", "leg_shape", "pattern", "color", "material", "texture_finish"]:
        assert group in tax.groups
    for group in ["embellishment", "heel_type", "toe_shape", "strap", "style_occasion"]:
        assert group in tax.groups


def test_published_example_values_are_in_the_vocabulary(tax: Taxonomy) -> None:
    # From the published release: main_attribute "leather", "sequin", "snakeskin";
    # other_attributes "applique, printed, bead".
    for value in ["leather", "sequin", "snakeskin", "applique", "printed", "bead", "v-neck", "crew neck"]:
        assert tax.group_of(value) is not None, value


def test_every_value_names_one_group(tax: Taxonomy) -> None:
    seen: dict[str, str] = {}
    for group in tax.groups:
        for value in tax.values(group):
            assert value not in seen, f"{value!r} is in {seen.get(value)} and {group}"
            assert value == value.lower() and "," not in value and "_" not in value
            seen[value] = group


def test_every_entry_records_its_sources(tax: Taxonomy) -> None:
    for entry in [*tax.categories.values(), *tax.groups.values()]:
        assert entry.sources and set(entry.sources) <= set(tax.sources), entry.name
    assert all(source.licence for source in tax.sources.values())
    assert "fashionpedia" in tax.sources


def test_to_json_shape(tax: Taxonomy) -> None:
    data = tax.to_json()
    assert set(data) == {"version", "categories", "groups", "applies", "values_for", "published", "multi"}
    assert data["values_for"]["bag"]["material"] == tax.values_for("bag", "material")
    assert data["published"]["sneakers"] == "shoe" and data["multi"] == {"color": 2, "material": 2}
    assert data["categories"] == tax.category_names()
    assert data["applies"]["dress"] == tax.groups_for("dress")
    assert data["groups"]["neckline"] == tax.values("neckline")
    json.dumps(data)


def test_fingerprint_changes_with_content_not_version(tax: Taxonomy) -> None:
    data = json.loads(PACKAGED.read_text(encoding="utf-8"))
    assert Taxonomy.from_dict(data).fingerprint == tax.fingerprint
    data["groups"][0]["values"][0]["synonyms"].append("an extra synonym")
    edited = Taxonomy.from_dict(data)
    assert edited.version == tax.version
    assert edited.fingerprint != tax.fingerprint


def test_the_packaged_file_validates_in_full_and_its_fingerprint_is_recorded() -> None:
    """default_taxonomy() builds content whose fingerprint is load.VALIDATED_FINGERPRINT without
    validating it again (start-up, issue 27); true only while that content passes in full."""
    data = json.loads(PACKAGED.read_text(encoding="utf-8"))
    load.validate(data, origin=str(PACKAGED))  # structure and rules, whatever the fingerprint
    assert load.fingerprint_of(data) == load.VALIDATED_FINGERPRINT, (
        f"taxonomy.json changed: set VALIDATED_FINGERPRINT = {load.fingerprint_of(data)!r} in load.py"
    )


@pytest.mark.parametrize("which", ["minimal", "packaged"])
def test_taxonomy_is_built_from_the_json_as_the_models_read_it(which: str) -> None:
    """The build reads the parsed JSON, not the pydantic models: a field left out must take the
    default its model gives it (minimal() leaves out every optional field)."""
    data = minimal() if which == "minimal" else json.loads(PACKAGED.read_text(encoding="utf-8"))
    from_json = load.build(data, origin="o", fingerprint="f")
    from_models = load.build(structure.validate(data).model_dump(), origin="o", fingerprint="f")
    for part in ("version", "categories", "groups", "sources", "super_categories", "body_regions"):
        assert getattr(from_json, part) == getattr(from_models, part), part


# -- JSON Schema ----------------------------------------------------------------------------------


def _walk_keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for value in node.values() for k in _walk_keys(value)}
    if isinstance(node, list):
        return {k for item in node for k in _walk_keys(item)}
    return set()


def test_every_schema_is_flat_and_complete(tax: Taxonomy) -> None:
    for category in tax.category_names():
        schema = tax.json_schema(category)
        assert not _walk_keys(schema) & {"allOf", "anyOf", "oneOf", "$ref", "$defs", "definitions"}
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert schema["required"] == ["category", *tax.groups_for(category), "main_attribute"]
        assert list(schema["properties"]) == schema["required"]
        assert schema["properties"]["category"]["enum"] == [category]
        for group in tax.groups_for(category):
            assert schema["properties"][group]["enum"] == [*tax.values_for(category, group), NOT_VISIBLE]
        assert schema["properties"]["main_attribute"]["enum"] == tax.category_values(category)
        assert NOT_VISIBLE not in schema["properties"]["main_attribute"]["enum"]
    # Against the metaschema: one category per super-category is enough (they share a shape).
    for category in ["dress", "sneakers", "bag", "sunglasses"]:
        jsonschema.Draft202012Validator.check_schema(tax.json_schema(category))


def test_jsonschema_accepts_valid_and_rejects_invalid(tax: Taxonomy) -> None:
    validator = jsonschema.Draft202012Validator(tax.json_schema("dress"))
    payload = valid_payload(tax, "dress")
    payload["sleeve_style"] = NOT_VISIBLE
    assert list(validator.iter_errors(payload)) == []

    out_of_vocabulary = {**payload, "neckline": "very low neck"}
    missing_group = {k: v for k, v in payload.items() if k != "neckline"}
    extra_key = {**payload, "mood": "happy"}
    wrong_category = {**payload, "category": "coat"}
    for bad in [out_of_vocabulary, missing_group, extra_key, wrong_category]:
        assert list(validator.iter_errors(bad)), bad


# -- validate_annotation and published columns ----------------------------------------------------


def test_validate_annotation_accepts_a_valid_payload(tax: Taxonomy) -> None:
    for category in tax.category_names():
        assert tax.validate_annotation(category, valid_payload(tax, category)) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda p: p.pop("neckline"), "missing group 'neckline'"),
        (lambda p: p.update(neckline="v neck"), "did you mean 'v-neck'"),
        (lambda p: p.update(neckline="very low"), "'very low' is not in the vocabulary"),
        (lambda p: p.update(mood="happy"), "extra key 'mood'"),
        (lambda p: p.update(main_attribute=NOT_VISIBLE), "not 'not_visible'"),
        (lambda p: p.update(main_attribute="leather"), "'leather' is not among the payload's values"),
        (lambda p: p.pop("main_attribute"), "missing key 'main_attribute'"),
        (lambda p: p.update(category="coat"), "expected 'dress'"),
        (lambda p: p.update(color=3), "must be a string"),
    ],
)
def test_validate_annotation_reports_each_fault(tax: Taxonomy, edit: Any, expected: str) -> None:
    payload = valid_payload(tax, "dress")
    edit(payload)
    errors = tax.validate_annotation("dress", payload)
    assert any(expected in error for error in errors), errors


def test_validate_annotation_unknown_category(tax: Taxonomy) -> None:
    errors = tax.validate_annotation("spacesuit", {"category": "spacesuit"})
    assert len(errors) == 1 and "unknown category 'spacesuit'" in errors[0]


def test_main_attribute_may_be_a_not_visible_groups_neighbour(tax: Taxonomy) -> None:
    payload = valid_payload(tax, "dress")
    payload["neckline"] = NOT_VISIBLE
    payload["main_attribute"] = payload["material"]
    assert tax.validate_annotation("dress", payload) == []


def test_published_columns(tax: Taxonomy) -> None:
    attributes = {
        "neckline": "v-neck",
        "sleeve_length": NOT_VISIBLE,
        "embellishment": "sequin",
        "texture_finish": "printed",
        "material": "leather",
        "color": "black",
    }
    main, others = tax.published_columns("dress", attributes, "sequin")
    assert main == "sequin"
    # category group order: neckline ... color, pattern, material, texture_finish, embellishment
    assert others == "v-neck, black, leather, printed"
    with pytest.raises(TaxonomyError, match="main_attribute 'lace'"):
        tax.published_columns("dress", attributes, "lace")
    with pytest.raises(TaxonomyError, match="not groups of this category"):
        tax.published_columns("dress", {"heel_type": "wedge"}, "wedge")
    with pytest.raises(TaxonomyError, match="not in the vocabulary"):
        tax.published_columns("dress", {"color": "octarine"}, "octarine")


# -- normalisation and the metadata prior ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Dress", "dress"),
        ("Dresses", "dress"),
        ("T-Shirts", "t-shirt"),
        ("tee", "t-shirt"),
        ("Trousers", "pants"),
        ("JEANS", "pants"),
        ("Handbag", "bag"),
        ("hoodie", "sweatshirt"),
        ("Trainers", "sneakers"),
        ("ankle boots", "boots"),
        ("pumps", "heels"),
        ("spacesuit", None),
        ("black dress", None),
    ],
)
def test_normalize_category(tax: Taxonomy, text: str, category: str | None) -> None:
    assert tax.normalize_category(text) == category


@pytest.mark.parametrize(
    ("group", "text", "value"),
    [
        ("neckline", "V Neck", "v-neck"),
        ("neckline", "ROUND NECK", "crew neck"),
        ("color", "Grey", "gray"),
        ("color", "off-white", "ivory"),
        ("material", "Faux-Leather", "faux leather"),
        ("material", "PU leather", "faux leather"),
        ("sleeve_length", "3/4 sleeves", "three-quarter sleeve"),
        ("embellishment", "Appliqué", "applique"),
        ("embellishment", "sequinned", "sequin"),
        ("pattern", "python", "snakeskin"),
        ("closure", "zip", "zipper"),
        ("neckline", "not visible", NOT_VISIBLE),
        ("color", "octarine", None),
    ],
)
def test_normalize_value(tax: Taxonomy, group: str, text: str, value: str | None) -> None:
    assert tax.normalize_value(group, text) == value


def test_find_values_on_product_titles(tax: Taxonomy) -> None:
    found = tax.find_values("jacket", "Women's Black Leather Biker Jacket with Zip Closure")
    assert found["color"] == "black"
    assert found["material"] == "leather"
    assert found["closure"] == "zipper"

    found = tax.find_values("dress", "Floral print midi dress, v-neck, short sleeves")
    assert found == {
        "neckline": "v-neck",
        "sleeve_length": "short sleeve",
        "garment_length": "midi",
        "pattern": "floral",
    }


def test_find_values_prefers_the_longest_match_and_whole_words(tax: Taxonomy) -> None:
    assert tax.find_values("jacket", "faux leather jacket")["material"] == "faux leather"
    assert tax.find_values("boots", "lace-up ankle boots")["closure"] == "lace-up"
    assert tax.find_values("boots", "lace-up ankle boots")["shaft_height"] == "ankle-high"
    # "tie" must not match inside "tie-dye", and "red" not inside "shredded".
    found = tax.find_values("t-shirt", "Tie-dye shredded tee")
    assert found.get("pattern") == "tie-dye" and "closure" not in found and "color" not in found
    # Only the category's groups: a dress has no heel type.
    assert "heel_type" not in tax.find_values("dress", "stiletto dress")
    assert tax.find_values("bag", "") == {}


def test_group_of(tax: Taxonomy) -> None:
    assert tax.group_of("v-neck") == "neckline"
    assert tax.group_of("v-neck", "dress") == "neckline"
    assert tax.group_of("v-neck", "sneakers") is None
    assert tax.group_of(NOT_VISIBLE) is None
    assert tax.group_of("v neck") is None  # exact value names only


def test_unknown_names_raise(tax: Taxonomy) -> None:
    with pytest.raises(TaxonomyError, match=r"unknown category 'spacesuit'.*dress"):
        tax.groups_for("spacesuit")
    with pytest.raises(TaxonomyError, match="unknown attribute group 'mood'"):
        tax.values("mood")
    with pytest.raises(TaxonomyError):
        tax.json_schema("spacesuit")


# -- malformed files ------------------------------------------------------------------------------


def minimal() -> dict[str, Any]:
    return {
        "version": "2026.11.0",
        "sources": [{"id": "fashionpedia", "title": "Fashionpedia", "licence": "CC BY 4.0"}],
        "groups": [
            {
                "name": "neckline",
                "sources": ["fashionpedia"],
                "values": [{"name": "v-neck", "synonyms": ["v neckline"]}, {"name": "crew neck"}],
            },
            {"name": "color", "sources": ["fashionpedia"], "values": [{"name": "black"}]},
        ],
        "categories": [
            {
                "name": "dress",
                "super_category": "apparel",
                "groups": ["neckline", "color"],
                "synonyms": ["gown"],
                "sources": ["fashionpedia"],
            }
        ],
    }


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "taxonomy.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_minimal_file_loads(tmp_path: Path) -> None:
    tax = load_taxonomy(write(tmp_path, minimal()))
    assert tax.category_names() == ["dress"]
    assert tax.normalize_value("neckline", "V-Neckline") == "v-neck"


def _drop_version(d: dict[str, Any]) -> None:
    del d["version"]


def _bad_version(d: dict[str, Any]) -> None:
    d["version"] = "v1"


def _duplicate_value(d: dict[str, Any]) -> None:
    d["groups"][0]["values"].append({"name": "v-neck"})


def _duplicate_synonym(d: dict[str, Any]) -> None:
    d["groups"][0]["values"][1]["synonyms"] = ["V-Neckline"]


def _unapplied_group(d: dict[str, Any]) -> None:
    d["groups"].append({"name": "heel_type", "sources": ["fashionpedia"], "values": [{"name": "wedge"}]})


def _unknown_group(d: dict[str, Any]) -> None:
    d["categories"][0]["groups"].append("mood")


def _unknown_source(d: dict[str, Any]) -> None:
    d["groups"][1]["sources"] = ["wikipedia"]


def _comma_in_value(d: dict[str, Any]) -> None:
    d["groups"][1]["values"].append({"name": "black, white"})


def _word_in_two_groups(d: dict[str, Any]) -> None:
    d["groups"][1]["values"].append({"name": "navy", "synonyms": ["v neckline"]})


def _category_synonym_twice(d: dict[str, Any]) -> None:
    d["categories"].append({**d["categories"][0], "name": "gown dress", "synonyms": ["gown"]})


def _typo_field(d: dict[str, Any]) -> None:
    d["groups"][1]["values"][0]["synonym"] = ["jet black"]


def _reserved_not_visible(d: dict[str, Any]) -> None:
    d["groups"][1]["values"].append({"name": "not visible"})


def _multi_as_text(d: dict[str, Any]) -> None:
    d["groups"][1]["multi"] = "2"  # exact JSON types: no coercion of "2" (or true) to a number


def _null_published(d: dict[str, Any]) -> None:
    d["categories"][0]["published"] = None


def _source_without_licence(d: dict[str, Any]) -> None:
    del d["sources"][0]["licence"]


def _no_values(d: dict[str, Any]) -> None:
    d["groups"][1]["values"] = []


def _synonyms_not_a_list(d: dict[str, Any]) -> None:
    d["groups"][0]["values"][0]["synonyms"] = "v neckline"


def _reserved_group_name(d: dict[str, Any]) -> None:
    d["groups"][1]["name"] = "main_attribute"


def _unknown_top_level_key(d: dict[str, Any]) -> None:
    d["categorys"] = []


def _region_without_regions(d: dict[str, Any]) -> None:
    d["categories"][0]["body_region"] = "upper body"


@pytest.mark.parametrize(
    ("edit", "entry", "fault"),
    [
        (_drop_version, "top level", "missing required field 'version'"),
        (_bad_version, "version", "is not a YYYY.M.N version"),
        (_duplicate_value, "group 'neckline' value 'v-neck'", "duplicates 'v-neck'"),
        (_duplicate_synonym, "group 'neckline' value 'crew neck'", "duplicates 'v neckline'"),
        (_unapplied_group, "group 'heel_type'", "applied to no category"),
        (_unknown_group, "category 'dress'", "unknown group 'mood'"),
        (_unknown_source, "group 'color'", "source 'wikipedia'"),
        (_comma_in_value, "group 'color' values[1]", "without commas"),
        (_word_in_two_groups, "category 'dress'", "'v neckline' means"),
        (_category_synonym_twice, "category 'gown dress'", "already names category 'dress'"),
        (_typo_field, "group 'color' values[0]", "unknown field(s) ['synonym']"),
        (_reserved_not_visible, "group 'color' values[1]", "reserved"),
        (_multi_as_text, "group 'color'", "multi: input should be a valid integer, got a string"),
        (_null_published, "category 'dress'", "published: input should be a valid string, got null"),
        (_source_without_licence, "sources[0]", "missing required field 'licence'"),
        (_no_values, "group 'color'", "values: must not be empty"),
        (_synonyms_not_a_list, "group 'neckline' values[0]", "synonyms: input should be a valid list"),
        (_reserved_group_name, "groups[1]", "name 'main_attribute' must be snake_case and not one of"),
        (_unknown_top_level_key, "top level", "unknown field(s) ['categorys']"),
        (
            _region_without_regions,
            "category 'dress'",
            "body_region given but the file declares no body_regions",
        ),
    ],
)
def test_malformed_file_names_file_entry_and_fault(tmp_path: Path, edit: Any, entry: str, fault: str) -> None:
    data = minimal()
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(TaxonomyError) as caught:
        load_taxonomy(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert entry in message and fault in message, message


def test_every_structural_fault_is_listed_one_a_line(tmp_path: Path) -> None:
    data = minimal()
    _typo_field(data)
    _multi_as_text(data)
    path = write(tmp_path, data)
    with pytest.raises(TaxonomyError) as caught:
        load_taxonomy(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 2 and all(line.startswith(f"{path}: group 'color'") for line in lines), lines


def test_bad_json_names_file_and_position(tmp_path: Path) -> None:
    path = write(tmp_path, '{"version": "2026.11.0",\n  "groups": [,]}')
    with pytest.raises(TaxonomyError, match=r"taxonomy\.json: line 2 column 14: not valid JSON"):
        load_taxonomy(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TaxonomyError, match=r"nope\.json: file: not found"):
        load_taxonomy(tmp_path / "nope.json")


# -- CLI ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def taxonomy_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A stand-in for the project's CLI, so that `taxonomy` is a sub-command."""

    register(app)
    return app


def test_cli_json(taxonomy_app: typer.Typer, tax: Taxonomy) -> None:
    result = CliRunner().invoke(taxonomy_app, ["taxonomy", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == tax.to_json()


def test_cli_schema(taxonomy_app: typer.Typer, tax: Taxonomy) -> None:
    result = CliRunner().invoke(taxonomy_app, ["taxonomy", "--schema", "dress"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == tax.json_schema("dress")


def test_cli_unknown_category_exits_2(taxonomy_app: typer.Typer) -> None:
    result = CliRunner().invoke(taxonomy_app, ["taxonomy", "--schema", "spacesuit"])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'spacesuit'" in lines[0] and "dress" in lines[0]
    result = CliRunner().invoke(taxonomy_app, ["taxonomy", "--schema", "Dresses"])
    assert result.exit_code == 2 and "did you mean 'dress'?" in result.stderr


def test_cli_tables_and_other_file(taxonomy_app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(taxonomy_app, ["taxonomy", "--file", str(write(tmp_path, minimal()))])
    assert result.exit_code == 0, result.output
    assert "2026.11.0" in result.stdout and "neckline" in result.stdout and "v-neck" in result.stdout


def test_cli_bad_file_exits_1(taxonomy_app: typer.Typer, tmp_path: Path) -> None:
    data = minimal()
    _unknown_group(data)
    result = CliRunner().invoke(taxonomy_app, ["taxonomy", "--file", str(write(tmp_path, data)), "--json"])
    assert result.exit_code == 1
    assert "unknown group 'mood'" in result.stderr


# -- issue 13: the published benchmark's language, Fashionpedia, applies, multi ------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "taxonomy.md"
FASHIONPEDIA = Path("/work/shared/taxonomies/fashionpedia-ontology.json")


def _doc_table(header: str) -> list[list[str]]:
    """The rows of the docs/taxonomy.md table whose header row starts with ``header``."""
    lines = DOCS.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_every_known_lookbench_category_is_published_as_documented(tax: Taxonomy) -> None:
    rows = _doc_table("LookBench published name")
    assert {name for name, _ in rows} >= {"dress", "coat", "pants", "bag", "shoe", "blouse"}
    for name, ours in rows:
        assert name in tax.published_categories()
        assert tax.categories_published_as(name) == [c.strip() for c in ours.split(",")]
    assert "blouse" in tax.categories and tax.normalize_category("blouses") == "blouse"
    assert tax.normalize_category("blouse") != "shirt"
    assert {tax.published_category(c) for c in tax.categories_published_as("shoe")} == {"shoe"}
    assert tax.published_category("dress") == "dress"
    # The finer names keep working: the prior, the sample store and earlier annotations use them.
    for name in ["sneakers", "boots", "heels", "sandals", "flats", "loafers", "oxfords", "sunglasses"]:
        assert name in tax.categories


def test_every_known_lookbench_value_is_in_its_documented_group(tax: Taxonomy) -> None:
    rows = _doc_table("LookBench value")
    assert {v for v, _ in rows} == {"leather", "sequin", "snakeskin", "applique", "printed", "bead"}
    for value, group in rows:
        assert tax.group_of(value) == group
        # and a garment the release shows it on can take it
        assert value in tax.values_for("dress", group)


def test_fashionpedia_main_categories_are_mapped_as_documented(tax: Taxonomy) -> None:
    rows = {int(i): (name, ours) for i, name, ours in _doc_table("id")}
    if FASHIONPEDIA.exists():  # the shared copy of the ontology: the 27 main apparel categories
        ontology = json.loads(FASHIONPEDIA.read_text(encoding="utf-8"))["categories"]
        main = {c["id"]: c["name"] for c in ontology if c["id"] < 27}
        assert {i: name for i, (name, _) in rows.items()} == main
    assert sorted(rows) == list(range(27))
    covered = 0
    for _, ours in rows.values():
        names = [n.strip() for n in ours.split(",") if n.strip() not in ("", "-", "—")]
        assert all(n in tax.categories for n in names), names
        covered += bool(names)
    assert covered / 27 >= 0.8
    assert covered == 27


def test_every_new_category_has_groups_synonyms_and_sources(tax: Taxonomy) -> None:
    for name in ["blouse", "tights", "socks", "leg warmers", "wallet", "headband", "tie", "gloves",
                 "watch", "glasses", "umbrella"]:  # fmt: skip
        cat = tax.categories[name]
        assert cat.groups and cat.synonyms and cat.sources
        for group in cat.groups:
            assert tax.values_for(name, group)
    assert "sleeve_length" not in tax.groups_for("watch") and "frame_shape" in tax.groups_for("glasses")
    assert (
        tax.normalize_category("Eyeglasses") == "glasses" and tax.normalize_category("shades") == "sunglasses"
    )
    assert tax.normalize_category("stockings") == "tights" and tax.normalize_category("sock") == "socks"


def test_values_for_keeps_only_values_that_suit_the_category(tax: Taxonomy) -> None:
    assert "fleece" not in tax.values_for("bag", "material")
    assert "fleece" in tax.values_for("sweatshirt", "material")
    assert "double-breasted" not in tax.values_for("bag", "closure")
    assert "double-breasted" in tax.values_for("coat", "closure")
    assert "below-the-knee" not in tax.values_for("t-shirt", "garment_length")
    assert tax.values_for("pants", "garment_length") == ["cropped", "ankle length", "capri", "full length"]
    assert "leather" not in tax.values_for("t-shirt", "material") and "leather" in tax.values_for(
        "bag", "material"
    )
    assert tax.values_for("dress", "color") == tax.values("color")[: len(tax.values_for("dress", "color"))]
    with pytest.raises(TaxonomyError, match="does not apply to 'bag'"):
        tax.values_for("bag", "neckline")
    assert tax.value_applies("coat", "closure", "double-breasted")
    assert not tax.value_applies("bag", "closure", "double-breasted")
    assert not tax.value_applies("bag", "neckline", "v-neck")
    # the schema, validation and the prior follow the same restriction
    enum = tax.json_schema("bag")["properties"]["material"]["enum"]
    assert enum == [*tax.values_for("bag", "material"), NOT_VISIBLE]
    assert "fleece" not in tax.json_schema("bag")["properties"]["main_attribute"]["enum"]
    payload = valid_payload(tax, "bag") | {"material": "fleece"}
    assert "material: 'fleece' does not apply to 'bag' (see Taxonomy.values_for)" in tax.validate_annotation(
        "bag", payload
    )
    assert "material" not in tax.find_values("bag", "Fleece-lined tote")
    assert tax.find_values("sweatshirt", "Fleece hoodie")["material"] == "fleece"


def test_the_sample_store_ground_truth_uses_applicable_values(tax: Taxonomy) -> None:
    for product in build_catalog():
        category = tax.normalize_category(product.category)
        for group, value in product.attributes.items():
            assert tax.value_applies(category, group, value), (product.category, group, value)


@pytest.mark.parametrize(
    ("edit", "fault"),
    [
        (
            lambda d: d["groups"][0]["values"][0].update(applies=["bag"]),
            "names 'bag', which does not have group",
        ),
        (lambda d: d["groups"][0]["values"][0].update(applies=["sofa"]), "unknown category 'sofa'"),
        (lambda d: d["groups"][0]["values"][0].update(applies=["dress"], not_for=["top"]), "not both"),
        (lambda d: d["groups"][0]["values"][0].update(applies=[]), "would apply nowhere"),
        (lambda d: d["groups"][0].update(multi=9), "multi 9 must be an integer from 1 to 3"),
        (lambda d: d["groups"][0]["values"][0].update(name="red|blue"), "'|'"),
        (lambda d: d["categories"][0].update(published="Shoes_X"), "published"),
    ],
)
def test_loader_refuses_bad_restrictions(edit, fault: str) -> None:
    data = json.loads(PACKAGED.read_text(encoding="utf-8"))
    edit(data)
    with pytest.raises(TaxonomyError, match=re.escape(fault)):
        Taxonomy.from_dict(data)


def test_loader_refuses_a_group_left_without_values_for_a_category() -> None:
    data = json.loads(PACKAGED.read_text(encoding="utf-8"))
    rise = next(g for g in data["groups"] if g["name"] == "rise")
    for value in rise["values"]:
        value["not_for"] = ["shorts"]
    with pytest.raises(TaxonomyError, match="no value applies to 'shorts'"):
        Taxonomy.from_dict(data)


def test_multi_valued_groups_schema_validation_and_publication(tax: Taxonomy) -> None:
    assert tax.multi("color") == 2 and tax.multi("material") == 2 and tax.multi("pattern") == 1
    schema = tax.json_schema("top", multi=True)
    assert not _walk_keys(schema) & {"allOf", "anyOf", "oneOf", "$ref"}
    jsonschema.Draft202012Validator.check_schema(schema)
    color = schema["properties"]["color"]
    assert color["type"] == "array" and color["maxItems"] == 2 and color["minItems"] == 1
    assert color["items"]["enum"] == [*tax.values_for("top", "color"), NOT_VISIBLE]
    assert schema["properties"]["pattern"]["type"] == "string"
    validator = jsonschema.Draft202012Validator(schema)
    payload = valid_payload(tax, "top") | {
        "color": ["red", "white"],
        "material": ["cotton"],
        "pattern": "stripe",
    }
    payload["main_attribute"] = "stripe"
    assert list(validator.iter_errors(payload)) == []
    assert list(validator.iter_errors(payload | {"color": ["red", "white", "navy"]}))
    assert tax.validate_annotation("top", payload, multi=True) == []
    assert tax.validate_annotation("top", payload | {"main_attribute": "white"}, multi=True) == []
    assert tax.validate_annotation("top", payload | {"color": "red|white"}, multi=True) == []
    assert tax.validate_annotation("top", payload | {"color": ["red", "red"]}, multi=True)
    assert tax.validate_annotation("top", payload | {"color": ["red", NOT_VISIBLE]}, multi=True)
    assert tax.validate_annotation("top", payload | {"color": ["red", "white", "navy"]}, multi=True)
    assert tax.validate_annotation("top", payload, multi=False)  # the single-value schema refuses lists
    assert tax.validate_annotation("top", payload | {"pattern": ["stripe", "check"]}, multi=True)
    # The release: main_attribute is one value, other_attributes lists each visible value once.
    attrs = {"color": "red|white", "material": "cotton", "pattern": "stripe"}
    assert tax.published_columns("top", attrs, "red") == ("red", "white, stripe, cotton")
    assert tax.published_columns("top", attrs | {"color": ["red", "white"]}, "white") == (
        "white",
        "red, stripe, cotton",
    )


def test_values_match_is_set_intersection() -> None:
    assert split_values("red|white") == ("red", "white") and split_values("red") == ("red",)
    assert values_match("red|white", "white|navy") and values_match("red", ["navy", "red"])
    assert not values_match("red|white", "navy") and not values_match(NOT_VISIBLE, NOT_VISIBLE)
