"""Facts that many shops state by one shared convention the main readers did not read (issue 27).

Each reader names the convention it reads, fills only a fact its caller's stronger sources left
empty, and returns None when the page does not state the fact plainly:

- `property_value`: schema.org's `additionalProperty` on a Product, a list of `PropertyValue`
  name/value pairs (Google's merchant listing guide; marketplaces, Shopware, Magento and
  WooCommerce SEO plugins write "category", "Color", "Material" this way). It is structured data
  about the product itself, so it ranks after the Product's own `category` / `color` /
  `material` and before anything read from the visible page.
- `buy_control_stock`: a product page whose own buy control (an add-to-cart button, link or form
  outside product cards) is enabled, and which shows no out-of-stock or "coming soon" statement
  anywhere outside product cards, sells the product now: InStock. Shops disable, hide or replace
  that control ("Sold out", "Notify me") when the product cannot be bought. It ranks after
  every stated stock (markup, a stock element, an "Availability" field).
- `url_keyed_number`: a script-built product header (React, Vue) with no markup shows the item
  number ("Nr 262708", "Art.-Nr. 262708") that the page's URL keys by (`/produkt/vin/crudo-262708/`):
  both say the page is that item's detail page, and the number is its id. It marks a product page
  only when no buy control, stock element or product gallery does, and gives the id only after
  every other id rule.
- `other_than_product`: Open Graph's `og:type` names what a page is. Its types other than `product`
  (`website`, `article`, `profile`, `video.*`) say the page is not a product's; an app's own
  namespaced type (`g-favorites:item`, Gmarket's) says nothing either way.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from lookbench_live.scrapers.extract.values import clean_title

# The PropertyValue names that state a fact, in the languages of the corpus' shops.
_PROPERTY_NAMES = {
    "category": re.compile(
        r"(?i)^(?:product[ _-]?)?(?:category|categories|kategori|kategorie|catégorie|categor[ií]a|categorie)$"
    ),
    "color": re.compile(r"(?i)^(?:colou?r|farbe|couleur|colore|cor|kleur|färg|farge|farve)$"),
    "material": re.compile(
        r"(?i)^(?:materials?|materiale|materiaal|material composition|composition|zusammensetzung|"
        r"mati[eè]re|composici[oó]n|composizione|fabric|stoff|tissu|tejido|obermaterial)$"
    ),
}


def property_value(nodes: list[dict[str, Any]], fact: str) -> str | None:
    """The value of the first `additionalProperty` `PropertyValue` of `nodes` (the shown variant
    first, then its group) whose `name` (or `propertyID`) names `fact` ("category", "Color",
    "Farge", "Material"…); a list of values reads as its first. None when none states it."""
    names = _PROPERTY_NAMES[fact]
    for node in nodes:
        properties = node.get("additionalProperty")
        for item in properties if isinstance(properties, list) else [properties]:
            if not isinstance(item, dict):
                continue
            label = clean_title(item.get("name")) or clean_title(item.get("propertyID"))
            if not label or not names.match(label):
                continue
            value = item.get("value")
            if isinstance(value, list):
                value = next((v for v in value if isinstance(v, str | int | float)), None)
            text = clean_title(str(value)) if isinstance(value, str | int | float) else None
            if text:
                return text
    return None


# A statement that the product cannot be bought now, though a button may still be on the page:
# "coming soon", "in stock soon", "back in stock", "notify me", "pre-order", "expected …".
NOT_YET = re.compile(
    r"(?i)\b(?:coming soon|(?:in|back in) stock soon|back in stock|notify me|pre-?order|when it arrives|"
    r"expected (?:in stock|on|by)|demnächst|bald (?:wieder )?verfügbar|bientôt disponible|"
    r"prochainement|próximamente|in arrivo|binnenkort)\b"
)
# A control that puts the product into a cart, in the words shop platforms' own translations
# give the button (Shopify, Magento, PrestaShop, WooCommerce: "Agregar al carrito", "Dodaj do
# koszyka", "Sepete ekle", "カートに入れる"). Never the words that lead to the cart ("Go to cart",
# "Zum Warenkorb", "Přejít do košíku"), nor a one-click "Buy now" of an e-book, which says nothing
# about stock. Not yet Chinese, Japanese or Korean: `buy_control_stock` needs the page's words for
# "sold out" in the page's language too.
ADD_TO_CART = (
    r"add(?:ing)?[-_ ]?to[-_ ]?(?:(?:your|my)[-_ ])?(?:shopping[-_ ])?(?:cart|basket|bag|trolley)|addtocart|"
    r"in den (?:warenkorb|einkaufswagen)|warenkorb hinzufügen|ajout(?:er)? au panier|"
    r"añadir a la cesta|(?:añadir|agregar) al carrito|(?:añadir|agregar) a la bolsa|"
    r"aggiungi al carrello|metti nel carrello|adicionar ao carrinho|adicionar à sacola|"
    r"in winkelwagen|toevoegen aan (?:de )?(?:winkelwagen|winkelmand)|"
    r"lägg i varukorgen|læg i kurv(?:en)?|legg i handlekurv(?:en)?|lisää ostoskoriin|dodaj do koszyka|"
    r"(?:vložit|přidat) do košíku|sepete ekle|добавить в корзину"
)
_ADDS = re.compile(f"(?i){ADD_TO_CART}")
_DISABLED_CLASS = frozenset({"disabled", "is-disabled", "hidden", "is-hidden", "d-none", "hide"})
_SUBMIT_TYPES = frozenset({"submit", "image", "button"})


def buy_control_stock(controls: list[Any], out_of_stock: re.Pattern[str], page_text: str) -> str | None:
    """InStock when the page's own add-to-cart controls (buttons and submit inputs that add to a
    cart, add-to-cart forms and links that run a script rather than lead to a page, outside
    product cards: from `controls`; a link to a page may be another product's, a one-click
    "Buy now" sells e-books that have no stock) are all enabled and the
    page's text outside product cards states neither an out-of-stock phrase (`out_of_stock`) nor
    one of `NOT_YET`. None otherwise: a disabled or hidden button, "Sold out", "Notify me when in
    stock" or "In stock soon" leaves the stock unknown."""
    adds = [c for c in controls if c.tag == "form" or _ADDS.search(_label(c))]
    # A sticky bar's copy of the button (shown when the page scrolls) is the same button.
    scripted = [c for c in adds if c.tag == "a" and _script_link(c) and not _in_sticky_bar(c)]
    # One script link is the product's own button; several are a row of other products'
    # quick-add links ("Complete the look") on a page too small for product cards.
    own = [c for c in adds if c.tag != "a" or (c in scripted and len(scripted) == 1)]
    if not own or any(_disabled(c) for c in own):
        return None
    if any(c.tag == "form" and not _submits(c) for c in own):
        return None  # a form without a usable submit control sells nothing
    if out_of_stock.search(page_text) or NOT_YET.search(page_text):
        return None
    return "InStock"


_STICKY = re.compile(r"(?i)sticky|fixed")


def _in_sticky_bar(element: Any) -> bool:
    return any(_STICKY.search(node.get("class") or "") for node in (element, *element.iterancestors()))


def _script_link(link: Any) -> bool:
    """A link that goes nowhere (`href="javascript:void(0)"`, `"#"`, `"#none"`, none): a script's
    button styled as a link (Disney Store's "Add to Bag"), not a way to another product's page."""
    href = (link.get("href") or "").strip().lower()
    return not href or href.startswith(("#", "javascript:"))


def _label(control: Any) -> str:
    return " ".join(
        (
            control.get("id") or "",
            control.get("class") or "",
            control.get("name") or "",
            control.get("value") or "",
            control_name(control),
            button_picture(control),
        )
    )


def control_name(control: Any) -> str:
    """A button's, input's or link's name as a browser states it to its users (HTML-AAM, in
    short): its `aria-label`; an image input's `alt` or an input's `value`; else its text, where
    each picture inside it reads as its `alt` (an older shop's `<a href=…><img src="buy.gif"
    alt="Add to basket"></a>`, which a sighted user reads as the button's words); else its
    `title`."""
    name = control.get("aria-label") or ""
    if not name.strip() and control.tag == "input":
        name = (control.get("alt") if control_type(control) == "image" else "") or control.get("value") or ""
    elif not name.strip():
        name = _shown_words(control)
    return " ".join((name if name.strip() else control.get("title") or "").split())


# An older shop's button is a picture of its words, often with no `alt`: the file's name says
# what it does (`btn_addtocart.gif`, `b-addtocart.gif`, `add_to_basket.png`, `add_to_order_btn2.gif`).
_BUTTON_PICTURE = re.compile(
    r"(?i)add[-_]?to[-_]?(?:cart|basket|bag|trolley|order)|addtocart|addtobasket|buy[-_]?now"
)


def button_picture(control: Any) -> str:
    """The name of the picture file a button shows as its words (an image input's `src`, the
    `<img>` inside a link or button), when the name says "add to cart" or "buy now"; else ""."""
    pictures = [control] if control.tag == "input" else list(control.iter("img"))
    for picture in pictures:
        name = (picture.get("src") or "").rsplit("/", 1)[-1].split("?", 1)[0]
        if _BUTTON_PICTURE.search(name):
            return name
    return ""


def _shown_words(node: Any) -> str:
    parts = [node.text or ""]
    for child in node:
        if isinstance(child.tag, str):
            parts.append(f" {child.get('alt') or ''} " if child.tag == "img" else _shown_words(child))
        parts.append(child.tail or "")
    return "".join(parts)


def control_type(element: Any) -> str:
    """A `<button>` / `<input>`'s type as HTML reads it: a button submits unless it says otherwise,
    an input is a text field."""
    return (element.get("type") or ("submit" if element.tag == "button" else "text")).lower()


def _submits(form: Any) -> bool:
    return any(control_type(e) in _SUBMIT_TYPES and not _disabled(e) for e in form.iter("button", "input"))


def _disabled(element: Any) -> bool:
    """The control or one of its holders is disabled or hidden (`disabled`, `aria-disabled`,
    `hidden`, `display:none`, a class "disabled" / "hidden" / "d-none")."""
    for node in (element, *element.iterancestors()):
        if node.get("disabled") is not None or node.get("hidden") is not None:
            return True
        if (node.get("aria-disabled") or "").lower() == "true":
            return True
        if re.search(r"display\s*:\s*none", node.get("style") or ""):
            return True
        if _DISABLED_CLASS & set((node.get("class") or "").lower().split()):
            return True
    return False


# A catalogue number the page labels as the item's ("Nr 262708", "Art.-Nr. 262708", "Varenr.
# 262708", "Item no. 262708", "Artikelnummer: 262708"): the element's whole text, five digits or
# more (a year, "Nr 1" in a tile or a house number is no item number).
_NUMBER = re.compile(
    r"(?i)(?:nr|art(?:ikel)?\.?\s?-?nr|artikelnummer|vare-?nr|varunr|item(?:\s+no|\s*#)?|numéro|número"
    r"|상품\s?번호|상품\s?코드|商品(?:编号|編號|番号|コード)|品番)"
    r"\.?\s*[:#]?\s*(?P<id>\d{5,12})"
)


def url_keyed_number(body: Any, url: str) -> str | None:
    """The item number an element of the page labels ("Nr 262708") and the page's URL keys by
    (`/produkt/vin/crudo-262708/`, `?id=262708`): two statements that this page is that item's
    detail page, as a shop's product header shows (a listing's URL names no one item). Only
    short elements are read (a label and a number), never a long block's text."""
    parts = urlsplit(url)
    keys = {v for pair in parts.query.split("&") for v in pair.split("=")[1:]}
    keys |= set(re.split(r"[/\-_.]", parts.path))
    keys.discard("")
    if not any(k.isdigit() for k in keys):
        return None
    for element in body.iter("span", "div", "p", "li", "dd", "td", "small", "strong"):
        if len(element) > 2:
            continue
        text = " ".join(element.text_content().split())
        if len(text) > 40:
            continue
        found = _NUMBER.fullmatch(text)
        if found and found.group("id") in keys:
            return found.group("id")
    return None


def other_than_product(og_type: str | None) -> bool:
    """Whether a page's `og:type` states it is something other than a product's page: any type
    without "product" in it (`website`, `article`, `video.movie`), except an app's own namespaced
    type (`app:type`), which Open Graph leaves to the app and which says nothing either way."""
    kind = (og_type or "").strip().lower()
    return bool(kind) and kind != "website" and "product" not in kind and ":" not in kind
