"""The VLM as extraction's last resort (issue 27), against the local OpenAI-protocol server on
127.0.0.1 (lookbench_live.testing.loopback_server): a value is kept only when the page states it,
a hallucinated one is dropped with its reason, and nothing is asked unless turned on."""

from __future__ import annotations

import hashlib
import json
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from lookbench_live.config import AnnotationSettings
from lookbench_live.schema.strict import openai_strict_problems
from lookbench_live.scrapers.extract import decode_body, extract_document
from lookbench_live.scrapers.extract.vlm import SCHEMA, complete_with_vlm
from lookbench_live.testing.loopback_server import LoopbackServer, free_port

CORPUS = Path(__file__).parents[2] / "corpus"
# systembolaget.se's product header (trimmed copy, no buy control) without its item number
# ("Nr 262708", which the URL also keys by: with it the visible-page rules read the header, see
# test_extract_conventions.py): no markup and nothing marks a product page, so only the VLM could.
SB = "sb_systembolaget-crudo"
SB_URL = "https://www.systembolaget.se/produkt/vin/crudo-262708/"
SB_NUMBER = '<div class="flex"><span class="sr-only">Nr <!-- -->262708</span><span aria-hidden="true">Nr <span>262708</span></span></div>'


def _page(name: str) -> tuple[str, str]:
    case = json.loads((CORPUS / "expected" / f"{name}.json").read_text(encoding="utf-8"))
    payload = next((CORPUS / "payloads").glob(name + ".*"))
    text = decode_body(payload.read_bytes())
    if name == SB:
        assert SB_NUMBER in text
        text = text.replace(SB_NUMBER, "")
    return text, case["url"]


def _key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()  # the server's truth is keyed by the request id


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as running:
        running.state.keep_bodies = True
        yield running


def _settings(server: LoopbackServer) -> AnnotationSettings:
    return AnnotationSettings(base_url=server.base_url, model="loopback-vlm", max_retries=0, timeout=10)


def test_the_schema_is_openai_strict():
    assert openai_strict_problems(SCHEMA) == []


def test_values_the_page_states_are_kept_and_a_hallucinated_brand_is_dropped(server):
    text, url = _page(SB)
    assert extract_document(text, url).products == []
    server.state.truth[_key(url)] = {
        "page_kind": "product",
        "title": "Crudo  Nerello Mascalese Frappato, 2025",  # spacing differs: compared normalised
        "price": "249:-",
        "currency": "SEK",  # the page writes "249 kronor"
        "brand": "Systembolaget Reserve",  # not on the page
    }
    before = server.state.total
    extraction = complete_with_vlm(extract_document(text, url), text, url, _settings(server))
    assert server.state.total == before + 1
    body = server.state.bodies[-1]
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "249 kronor" in body["messages"][1]["content"]  # the page's visible text was sent
    (product,) = extraction.products
    assert (product.title, product.price, product.currency) == (
        "Crudo Nerello Mascalese Frappato, 2025",
        Decimal("249"),
        "SEK",
    )
    assert product.brand is None
    assert {product.sources[f] for f in ("title", "price", "currency")} == {"vlm"}
    dropped = [p.detail for p in extraction.problems if p.reason == "vlm_value_not_on_page"]
    assert dropped == ["brand: 'Systembolaget Reserve'"]


def test_a_price_currency_and_title_the_page_does_not_state_give_no_product(server):
    text, url = _page(SB)
    server.state.truth[_key(url)] = {
        "page_kind": "product",
        "title": "Crudo Rosso Riserva",
        "price": "259",
        "currency": "EUR",
        "brand": None,
    }
    extraction = complete_with_vlm(extract_document(text, url), text, url, _settings(server))
    assert extraction.products == []
    dropped = sorted(
        p.detail.split(":")[0] for p in extraction.problems if p.reason == "vlm_value_not_on_page"
    )
    assert dropped == ["currency", "price", "title"]


def test_the_vlm_fills_only_what_the_markup_left_out(server):
    """Weekday's page states its title and price but no brand field; the model's other values
    never override the page's."""
    text, url = _page("page_weekday-sale")
    found = extract_document(text, url)
    title, price = found.products[0].title, found.products[0].price
    assert found.products[0].brand is None
    server.state.truth[_key(url)] = {
        "page_kind": "product",
        "title": "Other",
        "price": "1",
        "brand": "Weekday",
    }
    product = complete_with_vlm(found, text, url, _settings(server)).products[0]
    assert (product.title, product.price, product.brand) == (title, price, "Weekday")
    assert product.sources["brand"] == "vlm" and product.sources["title"] != "vlm"


def test_an_unreachable_endpoint_costs_the_fallback_not_the_page():
    text, url = _page(SB)
    settings = AnnotationSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0, timeout=5)
    extraction = complete_with_vlm(extract_document(text, url), text, url, settings)
    assert extraction.products == []
    assert [p.reason for p in extraction.problems] == ["vlm_unavailable"]


def test_extract_asks_the_vlm_only_with_vlm(server, cli, tmp_path):
    _, url = _page(SB)
    server.state.truth[_key(url)] = {
        "page_kind": "product",
        "title": "Crudo",
        "price": "249",
        "currency": None,
    }
    config = tmp_path / "vlm.toml"
    config.write_text(
        f'[annotation]\nbase_url = "{server.base_url}"\nmodel = "loopback-vlm"\n', encoding="utf-8"
    )
    page = tmp_path / "sb.html"
    page.write_text(_page(SB)[0], encoding="utf-8")
    before = server.state.total
    plain = subprocess.run(
        [cli, "extract", str(page), "--url", url, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 0 and plain.stdout == "" and server.state.total == before
    asked = subprocess.run(
        [cli, "extract", str(page), "--url", url, "--config", str(config), "--vlm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert asked.returncode == 0, asked.stderr
    product = json.loads(asked.stdout.splitlines()[0])
    assert (product["title"], product["price"], product["sources"]["price"]) == ("Crudo", "249", "vlm")
    before = server.state.total
    no_endpoint = subprocess.run(
        [cli, "extract", str(page), "--url", url, "--vlm"], capture_output=True, text=True, timeout=120
    )
    # --vlm with no [annotation] base_url: refused before any work, nothing printed or asked
    assert no_endpoint.returncode != 0 and no_endpoint.stdout == "" and server.state.total == before
