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


def test_an_aria_hidden_price_stays_hidden_chrome_goes():
    # Walmart hides its shown price digits from screen readers (which read a copy): the digits,
    # `itemprop="price"` among them, are what a shopper sees. A hidden menu is dropped.
    page = (
        '<html><body><div class="menu" aria-hidden="true">' + "<a>Shop all departments</a>" * 200 + "</div>"
        '<h1 itemprop="name">Booster Seat</h1><span aria-hidden="true" class="Price-group">'
        '<span class="Price-characteristic" itemprop="price" content="37.30">37</span></span>'
        "</body></html>"
    )
    tree = lxml_html.document_fromstring(_trim()(page, max_bytes=2_000))
    assert tree.xpath("//*[@itemprop='price']/@content") == ["37.30"]
    assert "Shop all departments" not in tree.text_content()


def test_a_yui_page_header_goes_unless_it_holds_the_product():
    # Pages on YUI grids (before HTML5) name the site's header and footer `#hd` / `#ft`.
    menu = "<li><a href='/c'>Bedding & Bath Store</a></li>" * 300
    page = (
        f"<html><body><div id='hd'><ul>{menu}</ul></div>"
        "<div id='bd'><h1>Dream Man Arm Pillow</h1><span class='price'>$28.49</span></div>"
        f"<div id='ft'><p>{'Help ' * 500}</p></div></body></html>"
    )
    tree = lxml_html.document_fromstring(_trim()(page, max_bytes=2_000))
    assert not tree.xpath("//*[@id='hd' or @id='ft']")
    assert tree.findtext(".//h1") == "Dream Man Arm Pillow"
    # A header that holds the product's heading is the product's: kept.
    page = page.replace("<div id='hd'><ul>", "<div id='hd'><h1>Sale</h1><ul>")
    tree = lxml_html.document_fromstring(_trim()(page, max_bytes=2_000))
    assert tree.xpath("//*[@id='hd']")


def test_a_page_cut_as_utf8_declares_utf8():
    # A 2010 page declared ISO-8859-1 ("Cyber-shot&reg;"): the cut page is written as UTF-8, so it
    # must say so, or a reader takes "®" for "Â®".
    from lookbench_live.scrapers.extract import decode_body

    for meta in (
        '<meta http-equiv="content-type" content="text/html;charset=ISO-8859-1">',
        '<meta charset="Shift_JIS">',
    ):
        page = f"<html><head>{meta}</head><body><h1>Cyber-shot&reg; W330</h1></body></html>"
        cut = _trim()(page, max_bytes=100_000).encode("utf-8")
        assert "Cyber-shot® W330" in decode_body(cut), meta


def test_a_long_layout_table_holding_the_product_stays():
    # Older shops lay the whole page out in one table: Buy.com's and Newegg's 2010 pages lost
    # their heading, price and picture when every table of more than 12 rows went.
    rows = "".join(f"<tr><td><a href='/c/{i}'>Category {i}</a></td></tr>" for i in range(40))
    product = "<tr><td><h1>Canon PowerShot S90</h1><span class='price'>$349.00</span></td></tr>"
    page = f"<html><body><table>{rows}</table><table>{product}{rows}</table></body></html>"
    tree = lxml_html.document_fromstring(_trim()(page, max_bytes=1_000))
    assert tree.findtext(".//h1") == "Canon PowerShot S90"
    assert len(tree.xpath("//table")) == 1  # the menu's table went
