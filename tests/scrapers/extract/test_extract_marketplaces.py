"""Issue 27, fifth round: East Asian marketplaces and the conventions they share with other shops,
each on a real dev payload of tests/corpus (Gmarket, Coupang, Musinsa, Taobao, Tmall, Mercari,
AliExpress, eBay, SSG), on a small hand-written page that shows the convention alone, and on a
case where it must NOT fire (a missing fact is better than an invented one). Keys changed by a
rule keep the old one as an alias, tested on a lake written before."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from corpus_pages import corpus_page, page_products

from lookbench_live.scrapers.extract import decode_body
from lookbench_live.scrapers.extract.conventions import other_than_product
from lookbench_live.scrapers.extract.html_fallback import currency_of
from lookbench_live.scrapers.extract.values import absolute_url, url_item_id, url_key
from lookbench_live.scrapers.items import CrawlItem
from lookbench_live.scrapers.pipelines import LakePipeline
from lookbench_live.warehouse.lake import Lake


def _shop(body: str, head: str = "", lang: str = "ko") -> str:
    return f'<html lang="{lang}"><head>{head}</head><body>{body}</body></html>'


# --------------------------------------------------------------------------- a page with no markup


def test_a_korean_product_header_is_the_pages_product():
    # Gmarket: `og:type` "g-favorites:item" (an app's own type), "상품번호 : 1155357080" that the
    # URL's `goodsCode` keys by, and the price right after the <h1> written "19,900원".
    text, url = corpus_page("webglass_gmarket-gourmet-hotdog")
    (product,) = page_products(text, url)
    assert product.title == "오플 CJ제일제당 고메핫도그 4봉 24개"
    assert (product.price, product.currency, product.product_id) == (Decimal("19900"), "KRW", "1155357080")
    assert product.sources["product_id"] == "html:number"
    # The Samsung page's first <h1> is the site's logo; the product's is the one its <title>
    # repeats once the marketplace's "[삼성전자]" tag is set aside. The "gmarketcard" tooltip is
    # no brand element ("market" is not the German "Marke").
    text, url = corpus_page("webglass_gmarket-galaxy-s9")
    (product,) = page_products(text, url)
    assert product.title == "[삼성전자] 최종혜택가868.480원자급제폰 갤럭시S9/S9+사은품증정"
    assert (product.price, product.currency, product.brand) == (Decimal("868480"), "KRW", None)


def test_a_website_og_type_does_not_veto_a_page_that_shows_a_product():
    # Coupang and Musinsa write `og:type` "website" on every page, product pages too.
    text, url = corpus_page("semi_coupang-tamsasu-water")
    (product,) = page_products(text, url)
    # Its `og:title`, not an option box's heading of class "title" ("개당 용량 × 총 수량"), and the
    # price to pay, not the struck "origin-price" 11,900원.
    assert (product.title, product.price, product.currency) == ("탐사수", Decimal("8390"), "KRW")
    text, url = corpus_page("msclone_musinsa-asics-gel-1130")
    (product,) = page_products(text, url)
    assert (product.price, product.currency, product.brand) == (
        Decimal("99000"),
        "KRW",
        "아식스",
    )  # logo alt "아식스 로고"
    assert other_than_product("website") is False and other_than_product("g-favorites:item") is False
    assert (
        other_than_product("article") and other_than_product("video.movie") and other_than_product("profile")
    )
    assert not other_than_product("product.item") and not other_than_product("")


def test_an_article_or_a_listing_is_still_no_product():
    header = '<h1>Autumn coats</h1><p class="price">129,000원</p><button>장바구니 담기</button>'
    article = _shop(header, head='<meta property="og:type" content="article">')
    assert page_products(article, "https://shop.example.kr/story/autumn") == []
    # The header's bare "장바구니" (the cart) link is on every page: no buy control, no product.
    cart_link = _shop('<h1>Autumn coats</h1><p class="price">129,000원</p><a href="/cart">장바구니</a>')
    assert page_products(cart_link, "https://shop.example.kr/autumn") == []
    buy = _shop('<h1>Wool Coat</h1><p class="price">129,000원</p><button>장바구니 담기</button>')
    (product,) = page_products(buy, "https://shop.example.kr/goods/wool-coat")
    assert (product.title, product.price, product.currency) == ("Wool Coat", Decimal("129000"), "KRW")


def test_the_won_and_the_yen_are_named_by_their_words_the_yuan_only_in_its_market():
    assert currency_of("19,900원", None) == "KRW" and currency_of("￦19,900", None) == "KRW"
    assert currency_of("1,280円", None) == "JPY"
    assert currency_of("149元", None) is None  # also Taiwan's and Hong Kong's dollar
    assert currency_of("149元", "zh-CN") == "CNY" and currency_of("￥149", "ja-JP") == "JPY"
    assert currency_of("￥149", None) is None


def test_a_zero_total_is_never_the_price():
    page = _shop(
        '<h1>Hot Dog 24</h1><p id="coreTotalPriceP">총 상품금액 0원</p>'
        '<p class="price">19,900원</p><button>바로구매</button>'
    )
    (product,) = page_products(page, "https://shop.example.kr/goods/hotdog")
    assert product.price == Decimal("19900")


# --------------------------------------------------------------------------- prices shown as a range


def test_a_price_range_gives_its_low_end():
    text, url = corpus_page("ogs_taobao-acrylic-keyboard-case")  # "¥149.00 - 159.00", shown as UTF-8
    (product,) = page_products(text, url)
    assert (product.title, product.price) == (
        "乳白亚克力外壳 60%键盘外壳 poker外壳无加强筋底壳透光外壳",
        Decimal("149.00"),
    )
    assert product.currency is None  # "¥" on a .com host with no language: the yen or the yuan
    # Tmall: "价格 ¥ 5499.00-6799.00"; the shop's ranking list ("item even first", "item odd")
    # is product cards, so its "￥4499.00" is another product's.
    text, url = corpus_page("ogs_tmall-iphone-11")
    (product,) = page_products(text, url)
    assert (product.price, product.brand) == (Decimal("5499.00"), "Apple/苹果")
    for shown, price in (("$20 - $35", "20"), ("€ 20 – 35", "20"), ("Price: $20 - $35", "20")):
        page = _shop(
            f'<h1>Tee</h1><span class="price">{shown}</span><button>Add to cart</button>', lang="en-US"
        )
        assert page_products(page, "https://shop.example.com/p/tee")[0].price == Decimal(price)


@pytest.mark.parametrize("shown", ["$35 - $20", "10% - 50,220", "20 - 35"])
def test_no_low_end_from_a_falling_pair_a_percentage_or_bare_numbers(shown):
    page = _shop(f'<h1>Tee</h1><span class="price">{shown}</span><button>Add to cart</button>', lang="en-US")
    assert page_products(page, "https://shop.example.com/p/tee") == []


# --------------------------------------------------------------------------- keys


def test_a_script_pages_key_is_the_item_its_query_names():
    assert url_key("https://item.taobao.com/item.htm?id=562283240178") == "562283240178"
    assert url_key("http://shop.example/DetailView/Item.asp?goodsCode=1155357080&x=1") == "1155357080"
    # Paths that name the item keep them; a query that names none leaves the path.
    assert url_key("https://shop.example/products/linen-shirt?id=5") == "/products/linen-shirt"
    assert url_key("https://shop.example/item.htm?ref=home") == "/item.htm"
    assert url_key("https://shop.example/item.htm?id=abc") == "/item.htm"  # no digit: no item number


def test_an_item_number_the_url_ends_in_is_the_key_and_the_path_an_alias():
    assert url_item_id("https://www.aliexpress.com/item/32993251330.html") == "32993251330"
    assert url_item_id("https://jp.mercari.com/item/m73194523815") == "m73194523815"
    assert url_item_id("https://shop.example/products/linen-shirt-42") is None
    assert url_item_id("https://shop.example/p/12345") is None  # five digits: a size, a year, a page
    text, url = corpus_page("shokandon_mercari-jp-lumix-fx77")
    (product,) = page_products(text, url)
    assert (product.product_id, product.id_aliases) == ("m73194523815", ["/item/m73194523815"])
    text, url = corpus_page("ogs_aliexpress-he-iphone-se")
    (product,) = page_products(text, url)
    assert (product.product_id, product.id_aliases) == ("32993251330", ["/item/32993251330.html"])


def test_a_lake_that_holds_the_path_key_keeps_it(tmp_path):
    text, url = corpus_page("shokandon_mercari-jp-lumix-fx77")
    (product,) = page_products(text, url)
    old_id = "/item/m73194523815"  # the key the rules before this round gave
    lake = Lake(tmp_path / "lake")
    first_seen = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
    before = type(product).from_json({**product.to_json(), "product_id": old_id, "id_aliases": []})
    lake.append([before.to_record("mercari", first_seen)])
    changed = {**product.to_json(), "price": "12800"}
    pipeline = LakePipeline(str(tmp_path / "lake"), "mercari", "run-2", str(tmp_path), batch_size=10)
    pipeline.open_spider()
    pipeline.add(CrawlItem("product", changed, observed_at="2026-12-01T00:00:00+00:00"))
    pipeline.close_spider()
    rows = lake.read("products", columns=["product_id", "first_seen_at", "price"]).to_pylist()
    assert {r["product_id"] for r in rows} == {old_id}  # no second key for the same item
    assert {r["first_seen_at"] for r in rows} == {first_seen}  # its freshness evidence kept


# --------------------------------------------------------------------------- text as the page shows it


def test_a_names_screen_reader_text_is_not_part_of_it():
    text, url = corpus_page("ogs_ebay-com-wicker-sofa-2016")  # <span class="g-hdn">Details about</span>
    (product,) = page_products(text, url)
    assert product.title == "Outdoor Wicker Patio Furniture Sofa 3 Seater Luxury Comfort Brown Wicker Couch"
    # The breadcrumb's "See more Best ChoiceProducts … Furni..." links to a catalog page.
    assert product.category_path == [
        "Home & Garden", "Yard, Garden & Outdoor Living", "Patio & Garden Furniture", "Patio & Garden Furniture Sets",
    ]  # fmt: skip
    offer = '<span itemprop="offers" itemscope itemtype="https://schema.org/Offer"><meta itemprop="price" content="10"><meta itemprop="priceCurrency" content="EUR"></span>'
    hidden_name = f'<div itemscope itemtype="https://schema.org/Product"><span itemprop="name" style="display:none">Wool Hat</span>{offer}</div>'
    (product,) = page_products(_shop(hidden_name, lang="en"), "https://shop.example/p/hat")
    assert product.title == "Wool Hat"  # the property's own element hidden: still its value


def test_a_stored_page_reencoded_as_utf8_is_read_as_utf8_and_real_gbk_as_gbk():
    page = '<html><head><meta charset="gbk"><title>乳白亚克力外壳</title></head><body></body></html>'
    assert "乳白亚克力外壳" in decode_body(page.encode("utf-8"))
    assert "乳白亚克力外壳" in decode_body(page.encode("gbk"))
    # A header's charset is the server's word: kept (Scrapy's order).
    assert "乳白亚克力外壳" not in decode_body(page.encode("utf-8"), "text/html; charset=gbk")


def test_a_host_written_without_its_slashes_is_another_host():
    text, url = corpus_page("ssgssak_ssg-kerastase-ciment-thermique")
    (product,) = page_products(text, url)
    assert product.images[0] == "https://sitem.ssgcdn.com/17/27/53/item/1000026532717_i1_1200.jpg"
    base = "https://www.ssg.com/item/itemView.ssg"
    assert absolute_url("images/a.jpg", base) == "https://www.ssg.com/item/images/a.jpg"
    assert absolute_url("photo.jpg/x", base) == "https://www.ssg.com/item/photo.jpg/x"


# --------------------------------------------------------------------------- price elements


def test_a_price_split_for_display_is_read_from_its_screen_reader_copy():
    split = (
        '<span class="a-price" data-a-size="xl"><span class="a-offscreen">$19.99</span>'
        '<span aria-hidden="true"><span class="a-price-symbol">$</span><span class="a-price-whole">19'
        '<span class="a-price-decimal">.</span></span><span class="a-price-fraction">99</span></span></span>'
    )
    page = _shop(
        f'<span id="productTitle">Cotton Tee</span><div id="corePrice_feature_div">{split}</div>'
        '<input type="submit" id="add-to-cart-button" value="Add to Cart">',
        lang="en-US",
    )
    (product,) = page_products(page, "https://www.amazon.com/dp/B000000001")
    assert (product.title, product.price, product.currency) == ("Cotton Tee", Decimal("19.99"), "USD")
    # A struck copy is the former price: no price, so no product.
    struck = split.replace('class="a-price"', 'class="a-price a-text-price" data-a-strike="true"')
    page = _shop(f'<span id="productTitle">Cotton Tee</span><div>{struck}</div><button>Add to Cart</button>')
    assert page_products(page, "https://shop.example.com/p/tee") == []


@pytest.mark.parametrize(
    ("klass", "shown", "lang", "price"),
    [("produkt-cena", "129,00 zł", "pl-PL", "129.00"), ("product-prijs", "€ 24,95", "nl-NL", "24.95"),
     ("produto-preco", "R$ 59,90", "pt-BR", "59.90"), ("pris", "249 kronor", "sv-SE", "249")],
)  # fmt: skip
def test_a_price_class_in_the_shops_language_names_the_price(klass, shown, lang, price):
    page = _shop(f'<h1>Sweater</h1><div class="{klass}">{shown}</div><button>Add to cart</button>', lang=lang)
    (product,) = page_products(page, "https://shop.example/p/sweater")
    assert product.price == Decimal(price)


def test_pris_inside_another_word_names_no_price():
    # Before the <h1>: no header price either.
    page = _shop('<div class="enterprise-banner">€ 24,95</div><h1>Sweater</h1><button>Add to cart</button>')
    assert page_products(page, "https://shop.example/p/sweater") == []
