"""Issue 27's rules for facts marketplace and storefront pages state outside the usual places
(`scrapers/extract/page_extras.py`), each on a real dev payload of tests/corpus and on the same
page edited so the fact is no longer stated: the rule must then give nothing."""

from __future__ import annotations

from decimal import Decimal

from corpus_pages import corpus_page, page_products


def test_a_twitter_product_card_is_read_and_needs_its_price_field():
    text, url = corpus_page("extruct_spinneys-lb-feta")
    (product,) = page_products(text, url)
    # Of the two titles, the one the other begins with (" | Chilled & Deli | Spinneys Lebanon").
    assert product.title == "Mevgal Bio Feta Cheese 200g"
    assert (product.price, product.currency) == (Decimal("139999.00"), "LBP")
    assert product.images[0].endswith("/489874-v001-1_1.jpg")
    assert product.sources["price"] == "meta:twitter:data"
    # The card's price field relabelled: no field says it is a price, so no product.
    assert page_products(text.replace('content="PRICE"', 'content="WEIGHT"'), url) == []
    # A page that says it is an article is no product, whatever its card says.
    article = text.replace('<meta charset="utf-8" />', '<meta property="og:type" content="article" />', 1)
    assert page_products(article, url) == []


def test_a_sold_listing_without_a_buy_button_is_a_product_out_of_stock():
    text, url = corpus_page("cev_vinted-fr-sold-nike-tshirt")
    (product,) = page_products(text, url)
    assert (product.title, product.price, product.currency) == ("T-shirt Nike", Decimal("15.00"), "EUR")
    assert product.availability == "OutOfStock"
    assert product.images[0].startswith("https://images1.vinted.net/t/06_01bdb_")  # "T-shirt Nike 1"
    # "Vendu par …" names the seller, not a sale: then nothing marks this as a product page.
    assert page_products(text.replace(">Vendu<", ">Vendu par marie<"), url) == []


def test_japanese_stock_words_fill_a_json_ld_offer_without_availability():
    text, url = corpus_page("kakaku_netoff-xenoblade-de")
    (product,) = page_products(text, url)
    assert product.availability == "InStock"
    assert product.sources["availability"] == "html:availability-element"
    (gone,) = page_products(text.replace("在庫あり", "在庫なし"), url)
    assert gone.availability == "OutOfStock"
    (unsaid,) = page_products(text.replace("在庫あり", "送料無料"), url)
    assert unsaid.availability is None


def test_a_data_product_id_the_url_also_states_is_the_key_and_microdata_breadcrumbs_are_read():
    text, url = corpus_page("klarna_no-raspberry-pi-5-b-8gb")
    (product,) = page_products(text, url)
    assert product.product_id == "3219888120"
    assert product.id_aliases[-1].startswith("/no/shopping/pl/cl10012/3219888120/")
    # The first crumb links to the locale's home page ("/no/", "Klarna"): no category.
    assert product.category_path == ["Data", "Datamaskiner", "Ettkortsdatamaskiner"]
    # An attribute value the URL does not state is not taken for the product's id.
    (other,) = page_products(text.replace('data-productid="3219888120"', 'data-productid="777"'), url)
    assert other.product_id.startswith("/no/shopping/")


def test_the_shown_sale_price_replaces_a_structured_price_shown_as_the_old_one():
    text, url = corpus_page("kakaku_surugaya-mononoke-timesale")
    (product,) = page_products(text, url)
    assert (product.price, product.currency) == (Decimal("2800"), "JPY")
    assert product.sources["price"] == "html:sale-price"
    assert product.category_path == ["映像ソフト", "アニメ", "劇場作"]  # "駿河屋TOP" links to "/"
    # The same amounts without the page marking 3,750円 as the old price: the JSON-LD price stays.
    (plain,) = page_products(text.replace("price-old", "price-grade"), url)
    assert plain.price == Decimal("3750")
