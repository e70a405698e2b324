"""scripts/trim_corpus_page.py, which cuts saved pages for tests/corpus: it drops the site's
header, footer and navigation but never the product's own `<header>` or the breadcrumb, and a
variant `<select>` goes with the label that names it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lxml import html as lxml_html

SCRIPT = Path(__file__).parents[3] / "scripts" / "trim_corpus_page.py"

PAGE = """<html><body class="is--ctl-detail catalog-product-view">
<header class="header-main"><a href="/">Shop</a><nav class="navigation-main">Damen Herren</nav></header>
<nav class="breadcrumb"><a href="/">Home</a> <a href="/damen">Damen</a></nav>
<div class="content product--details" itemscope itemtype="http://schema.org/Product">
  <header class="product--header"><h1 class="product--title" itemprop="name">Leinenhemd</h1>
    <div class="product--supplier">Marke: Acme</div></header>
  <p class="configurator--label">Farbe:</p>
  <div class="select-field"><select name="group[5]"><option>Bitte wählen</option><option>Blau</option></select></div>
  <label for="size">Größe:</label><select id="size"><option>S</option><option>M</option></select>
  <p class="price">49,95 €</p>
</div>
<footer class="footer-main">Impressum</footer>
</body></html>"""


def _trim():
    spec = importlib.util.spec_from_file_location("trim_corpus_page", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.trim


def test_the_products_header_and_the_breadcrumb_stay_the_sites_chrome_goes():
    tree = lxml_html.document_fromstring(_trim()(PAGE, max_bytes=1))  # every cut runs
    assert tree.xpath("//header[@class='product--header']//h1/text()") == ["Leinenhemd"]
    assert "Marke: Acme" in tree.text_content()
    assert tree.xpath("//nav[@class='breadcrumb']//a/text()") == ["Home", "Damen"]
    assert not tree.xpath("//header[@class='header-main']|//footer|//nav[@class='navigation-main']")


def test_a_variant_select_goes_with_its_label():
    text = lxml_html.document_fromstring(_trim()(PAGE, max_bytes=1)).text_content()
    assert not any(word in text for word in ("Farbe:", "Größe:", "Bitte wählen", "Blau"))
    assert "49,95 €" in text
