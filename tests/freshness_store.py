"""A loopback store built for the freshness tests (issue 22 §1), not the sample store.

Three sites on one 127.0.0.1 host, each showing what it had at the store's `clock` (the test's
clock, moved month by month):

- `/shop`, Shopify-shaped: a dated back catalogue published 2019–2024, and arrivals whose
  `published_at` is a few days before the second month's clock.
- `/woo`, WooCommerce Store API-shaped, undated (no `date_created*`): a catalogue present at the
  first crawl, and arrivals that appear only in the second month.
- `/shop` also has dated arrivals a few days before the first month's clock (a first
  release is its sites' baselines plus the dated arrivals).
- `/looks`, shop-the-look pages linking Shopify arrivals: a dated look each month with pixel
  boxes, and in month two one with percent hotspots (`data-bbox="10%,…"`) and one with point
  hotspots (`data-x`/`data-y` pixels); and one undated look present at the first crawl (a
  baseline look, linking back-catalogue products).

Every product photo is a JPEG carrying one of the eight EXIF orientations: its pixels are
stored so that the orientation turns them upright, with a red band along the upright top
(`is_upright`). Look photos paste the product photos (upright) where the hotspots say.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from PIL import Image, ImageDraw

CATEGORIES = ("dress", "skirt", "coat", "sweater", "t-shirt", "jacket", "pants", "shorts")
COLORS = ("red", "blue", "green", "black", "white", "yellow", "pink", "grey")
PHOTO_SIZE = (160, 200)  # upright width x height
LOOK_SIZE = (400, 300)
# Dated Shopify arrivals per month: enough that, after the looks' and generations' products are
# reserved, studio queries and noise still have some.
ARRIVALS = 14
# EXIF orientation -> the transpose that stores an upright image so that a viewer applying the
# orientation sees it upright (the inverse of what the orientation tag asks for).
STORE_TRANSPOSE = {
    1: None,
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,  # tag 6 = rotate 90 CW to view: store it rotated 90 CCW
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}


@dataclass(frozen=True, slots=True)
class Item:
    site: str  # shop | woo
    product_id: str
    title: str
    category: str
    color: str
    appears_at: dt.datetime  # when the store starts listing it
    published_at: dt.datetime | None  # what the platform states (None: undated)
    back_catalogue: bool  # old, or present at the baseline: must never be released as new
    photos: int = 2


@dataclass(frozen=True, slots=True)
class LookPage:
    look_id: str
    appears_at: dt.datetime
    published_at: dt.datetime | None
    products: tuple[str, ...]  # Shopify product ids
    hotspots: str  # "pixel" | "percent" | "point"
    baseline: bool


@dataclass
class FreshnessStore:
    """The store's content for a first month at `month_one` and a second at `month_two`."""

    month_one: dt.datetime
    month_two: dt.datetime
    clock: dt.datetime = field(init=False)
    items: list[Item] = field(init=False)
    looks: list[LookPage] = field(init=False)
    port: int = 0
    base_url: str = ""

    def __post_init__(self) -> None:
        self.clock = self.month_one
        early = self.month_one - dt.timedelta(days=400)  # long before either window
        items: list[Item] = []
        n = 0
        for year in range(2019, 2025):  # the dated back catalogue
            for k in range(2):
                cat, color = CATEGORIES[n % 8], COLORS[(n * 3) % 8]
                items.append(
                    Item("shop", f"{100 + n}", f"{color.title()} cotton {cat}", cat, color, early,
                         dt.datetime(year, 3 + k * 5, 11, 9, tzinfo=dt.UTC), True)
                )  # fmt: skip
                n += 1
        for _ in range(6):  # undated catalogue present at the first crawl
            cat, color = CATEGORIES[n % 8], COLORS[(n * 3) % 8]
            items.append(
                Item("woo", f"{100 + n}", f"{color.title()} wool {cat}", cat, color, early, None, True)
            )
            n += 1
        first = self.month_one - dt.timedelta(days=5)
        for k in range(ARRIVALS):  # dated arrivals of month one: the first release is baseline + these
            cat, color = CATEGORIES[n % 8], COLORS[(n * 3 + 3) % 8]
            items.append(
                Item("shop", f"{100 + n}", f"{color.title()} denim {cat}", cat, color, first,
                     first + dt.timedelta(hours=k), False, photos=3)
            )  # fmt: skip
            n += 1
        arrival = self.month_two - dt.timedelta(days=6)
        for k in range(ARRIVALS):  # dated arrivals of month two
            cat, color = CATEGORIES[n % 8], COLORS[(n * 3 + 1) % 8]
            items.append(
                Item("shop", f"{100 + n}", f"{color.title()} linen {cat}", cat, color, arrival,
                     arrival + dt.timedelta(hours=k), False, photos=3)
            )  # fmt: skip
            n += 1
        for _ in range(5):  # undated arrivals of month two
            cat, color = CATEGORIES[n % 8], COLORS[(n * 3 + 2) % 8]
            items.append(
                Item(
                    "woo",
                    f"{100 + n}",
                    f"{color.title()} silk {cat}",
                    cat,
                    color,
                    arrival,
                    None,
                    False,
                    photos=3,
                )
            )
            n += 1
        self.items = items
        new = [i for i in items if i.site == "shop" and not i.back_catalogue]
        one = [i.product_id for i in new if i.appears_at == first]
        two = [i.product_id for i in new if i.appears_at == arrival]
        old = [i.product_id for i in items if i.site == "shop" and i.back_catalogue]
        later = arrival + dt.timedelta(hours=8)
        self.looks = [
            LookPage("look-baseline", early, None, tuple(old[:2]), "pixel", True),
            LookPage("look-one", first, first + dt.timedelta(hours=8), tuple(one[:2]), "pixel", False),
            LookPage("look-two", arrival, later, tuple(two[4:6]), "pixel", False),
            LookPage("look-percent", arrival, later, tuple(two[:2]), "percent", False),
            LookPage("look-point", arrival, later, tuple(two[2:4]), "point", False),
        ]

    # ------------------------------------------------------------------ what the store shows
    def listed(self, site: str) -> list[Item]:
        return [i for i in self.items if i.site == site and i.appears_at <= self.clock]

    def item(self, product_id: str) -> Item:
        return next(i for i in self.items if i.product_id == product_id)

    def orientation(self, product_id: str, n: int) -> int:
        return 1 + (int(product_id) + n) % 8

    def photo(self, product_id: str, n: int) -> bytes:
        orientation = self.orientation(product_id, n)
        image = upright_photo(product_id, n)
        transpose = STORE_TRANSPOSE[orientation]
        stored = image.transpose(transpose) if transpose is not None else image
        exif = Image.Exif()
        exif[0x0112] = orientation
        out = io.BytesIO()
        stored.save(out, format="JPEG", quality=92, exif=exif.tobytes())
        return out.getvalue()

    def look_boxes(self, look: LookPage) -> list[tuple[int, int, int, int]]:
        """Pixel boxes of the products in the look photo (what the hotspots point at)."""
        w, h = 120, 150
        return [(30 + k * 200, 60, 30 + k * 200 + w, 60 + h) for k in range(len(look.products))]

    def look_photo(self, look: LookPage) -> bytes:
        canvas = Image.new("RGB", LOOK_SIZE, (235, 230, 220))
        for pid, box in zip(look.products, self.look_boxes(look), strict=True):
            canvas.paste(upright_photo(pid, 0).resize((box[2] - box[0], box[3] - box[1])), box[:2])
        out = io.BytesIO()
        canvas.save(out, format="JPEG", quality=92)
        return out.getvalue()

    # ------------------------------------------------------------------ pages
    def shopify_json(self, page: int) -> dict:
        items = self.listed("shop") if page == 1 else []
        return {"products": [self._shopify(i) for i in items]}

    def _shopify(self, i: Item) -> dict:
        base = self.base_url
        stamp = _iso(i.published_at)
        return {
            "id": int(i.product_id),
            "title": i.title,
            "handle": f"p-{i.product_id}",
            "body_html": f"<p>A {i.color} {i.category}.</p>",
            "published_at": stamp,
            "created_at": stamp,
            "updated_at": stamp,
            "vendor": "Loop",
            "product_type": i.category.title(),
            "tags": [i.category, i.color],
            "variants": [{"id": int(i.product_id) * 10, "title": "M", "option1": "M", "price": "49.00",
                          "compare_at_price": None, "available": True, "sku": f"SKU{i.product_id}"}],
            "images": [{"id": int(i.product_id) * 10 + n, "position": n + 1,
                        "src": f"{base}/img/{i.product_id}-{n}.jpg"} for n in range(i.photos)],
            "options": [{"name": "Size", "position": 1, "values": ["M"]}],
        }  # fmt: skip

    def woo_json(self, page: int) -> list[dict]:
        items = self.listed("woo") if page == 1 else []
        base = self.base_url
        return [
            {
                "id": int(i.product_id), "name": i.title, "slug": f"p-{i.product_id}",
                "permalink": f"{base}/woo/product/p-{i.product_id}/",
                "description": f"<p>A {i.color} {i.category}.</p>", "short_description": "",
                "prices": {"price": "4900", "regular_price": "4900", "sale_price": "4900", "currency_code": "EUR",
                           "currency_minor_unit": 2},
                "images": [{"id": n, "src": f"{base}/img/{i.product_id}-{n}.jpg", "alt": ""} for n in range(i.photos)],
                "categories": [{"id": 1, "name": i.category.title(), "slug": i.category}],
                "tags": [], "attributes": [], "variations": [], "is_purchasable": True, "is_in_stock": True,
            }  # the Store API states no date: these items are undated
            for i in items
        ]  # fmt: skip

    def look_index(self) -> str:
        links = "".join(
            f'<a href="/looks/{lk.look_id}">{lk.look_id}</a>'
            for lk in self.looks
            if lk.appears_at <= self.clock
        )
        return f"<!DOCTYPE html><html><head><title>Looks</title></head><body>{links}</body></html>"

    def look_page(self, look: LookPage) -> str:
        spots = []
        for pid, box in zip(look.products, self.look_boxes(look), strict=True):
            href = f"{self.base_url}/shop/products/p-{pid}"
            if look.hotspots == "pixel":
                spots.append(
                    f'<a class="hotspot" href="{href}" data-bbox="{",".join(map(str, box))}">{pid}</a>'
                )
            elif look.hotspots == "percent":
                x0, y0, x1, y1 = (100 * v / s for v, s in zip(box, LOOK_SIZE * 2, strict=True))
                spots.append(
                    f'<a class="hotspot" href="{href}" data-bbox="{x0:g}%,{y0:g}%,{x1:g}%,{y1:g}%">{pid}</a>'
                )
            else:
                cx, cy = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2
                spots.append(f'<a class="hotspot" href="{href}" data-x="{cx}" data-y="{cy}">{pid}</a>')
        meta = (
            f'<meta property="article:published_time" content="{_iso(look.published_at)}">'
            if look.published_at
            else ""
        )
        return (
            f"<!DOCTYPE html><html><head><title>{look.look_id}</title>{meta}</head><body>"
            f'<div class="shop-the-look" data-look-id="{look.look_id}">'
            f'<img class="look-photo" src="/img/looks/{look.look_id}.jpg" alt="{look.look_id}">'
            f"{''.join(spots)}</div></body></html>"
        )

    # ------------------------------------------------------------------ serving
    def respond(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        page = int((query.get("page") or ["1"])[0])
        if path == "/robots.txt":
            return 200, "text/plain", b"User-agent: *\nAllow: /\n"
        if path.startswith("/shop") and path.endswith("/products.json"):
            return 200, "application/json", json.dumps(self.shopify_json(page)).encode()
        if path.startswith("/woo/wp-json/wc/store") and path.rstrip("/").endswith("products"):
            return 200, "application/json", json.dumps(self.woo_json(page)).encode()
        if path in ("/looks", "/looks/"):
            return 200, "text/html", self.look_index().encode()
        if path.startswith("/looks/"):
            look = next((lk for lk in self.looks if path == f"/looks/{lk.look_id}"), None)
            if look is not None and look.appears_at <= self.clock:
                return 200, "text/html", self.look_page(look).encode()
        if path.startswith("/img/looks/"):
            look = next((lk for lk in self.looks if path == f"/img/looks/{lk.look_id}.jpg"), None)
            if look is not None:
                return 200, "image/jpeg", self.look_photo(look)
        if path.startswith("/img/") and path.endswith(".jpg"):
            pid, _, n = path.removeprefix("/img/").removesuffix(".jpg").partition("-")
            if any(i.product_id == pid for i in self.items) and n.isdigit():
                return 200, "image/jpeg", self.photo(pid, int(n))
        return 404, "text/plain", b"not found"

    @contextmanager
    def serving(self) -> Iterator[FreshnessStore]:
        store = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                status, kind, body = store.respond(parts.path, parse_qs(parts.query))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.base_url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


def upright_photo(product_id: str, n: int) -> Image.Image:
    """A distinct studio photo per (product, view): random blocks on a plain backdrop, clear of
    its edges as a product shot's are (RealStudioFlat's photo-type rule reads the border), and a
    red band along its top."""
    rng = random.Random(f"{product_id}:{n}")
    image = Image.new("RGB", PHOTO_SIZE, tuple(rng.randrange(40, 200) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    margin = 24
    for _ in range(14):
        x0 = rng.randrange(margin, PHOTO_SIZE[0] - margin - 70)
        y0 = rng.randrange(margin, PHOTO_SIZE[1] - margin - 70)
        draw.rectangle(
            (x0, y0, x0 + rng.randrange(10, 70), y0 + rng.randrange(10, 70)),
            fill=tuple(rng.randrange(0, 256) for _ in range(3)),
        )
    draw.rectangle((0, 0, PHOTO_SIZE[0], 14), fill=(230, 10, 10))
    return image


def is_upright(image: Image.Image) -> bool:
    """The red band is along the top (what an upright product photo of this store shows)."""
    rgb = image.convert("RGB")
    w, h = rgb.size
    band = [rgb.getpixel((x, max(1, h // 60))) for x in range(2, w - 2, max(1, w // 16))]
    return all(r > 170 and g < 80 and b < 80 for r, g, b in band)


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None
