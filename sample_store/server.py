"""The sample store's HTTP server: `SampleStore` serves the catalogue of `catalog` at its clock.

It publishes all four platform shapes (a Shopify-shaped store under `/shopify`, a
WooCommerce Store API under `/woo`, schema.org product pages with sitemaps and `lastmod`
under `/schema`, pages built by JavaScript under `/js`), look pages with hotspots under
`/looks`, a robots.txt with a disallowed path, and the broken pages and images of
reliability.md (see `catalog.BROKEN_IMAGES`). Images are drawn at first use.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lookbench_live.sample_store import images as drawing
from lookbench_live.sample_store import pages
from lookbench_live.sample_store.catalog import (
    BROKEN_IMAGES,
    CORE_ANCHOR,
    CORE_LOOKS_DAYS,
    DEFAULT_NOW,
    DEFAULT_PRODUCTS_PER_WEEK,
    LOOKS_LISTED_DAYS,
    LookSpec,
    ProductSpec,
    apply_sales,
    arrival,
    arrivals_until,
    build_catalog,
    build_looks,
    first_arrival_listed,
    monthly_looks,
)

__all__ = ["DEFAULT_NOW", "SampleStore"]

MAX_PAGE_SIZE = 250
IMAGE_CACHE = 2048  # drawn images kept (a crawl and its ingest ask for each about twice)


class SampleStore:
    """The store's HTTP server in a background thread; use as a context manager.

    `clock` is the moment the store shows (default `DEFAULT_NOW`; `now` is its old name):
    every product, look and date it publishes is what it had at that moment. `set_clock`
    moves it (same port: a later visit of the same store). `products_per_week` is the
    weekly arrival rate (>= 4 brings every platform shape every week); `looks_per_month`
    defaults to max(4, products_per_week). `latency` delays every response (to interrupt
    crawls in tests). `revision` > 0 changes every fifth product's price (to test changed
    products). `hits` lists the paths requested, in order.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        clock: dt.datetime | None = None,
        now: dt.datetime | None = None,
        products_per_week: int = DEFAULT_PRODUCTS_PER_WEEK,
        looks_per_month: int | None = None,
        latency: float = 0.0,
        revision: int = 0,
        host: str = "127.0.0.1",
    ):
        if products_per_week < 0:
            raise ValueError("products_per_week must be >= 0")
        self.products_per_week = products_per_week
        self.looks_per_month = looks_per_month if looks_per_month is not None else max(4, products_per_week)
        self.revision = revision
        self.latency = latency
        # Drawn images, most recently used last; bounded so a large store's crawl does not
        # keep every picture (they are drawn again, byte-identical, when asked again).
        self._images: OrderedDict[str, bytes] = OrderedDict()
        self._look_boxes: dict[str, list[tuple[int, int, int, int]]] = {}
        self._lock = threading.Lock()
        self.set_clock(clock or now or DEFAULT_NOW)
        self.hits: list[str] = []
        handler = type("Handler", (_Handler,), {"store": self})
        self._server = _QuietServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the clock
    def set_clock(self, clock: dt.datetime) -> None:
        """Show the store as it was (or will be) at `clock` (timezone-aware)."""
        if clock.tzinfo is None:
            raise ValueError("the sample store's clock must be timezone-aware (UTC)")
        clock = clock.astimezone(dt.UTC)
        per_week = self.products_per_week
        core = build_catalog(CORE_ANCHOR, self.revision)
        apply_sales(core, clock)
        count = arrivals_until(clock, per_week)
        # Drops older than the looks' memory plus the listing time can no longer be shown or linked.
        lowest = first_arrival_listed(clock - dt.timedelta(days=LOOKS_LISTED_DAYS), per_week)
        history = {p.product_id: p for p in core if p.published_at <= clock}
        for n in range(lowest, count):
            product = arrival(n, per_week, clock, core, self.revision)
            history[product.product_id] = product
        listed = [p for p in history.values() if p.removed_at is None or p.removed_at > clock]
        looks = [
            lk
            for lk in build_looks(core, CORE_ANCHOR)
            if clock < CORE_ANCHOR + dt.timedelta(days=CORE_LOOKS_DAYS)
        ]
        looks = [lk for lk in looks if lk.published_at <= clock]
        looks += monthly_looks(clock, self.looks_per_month, history, core)
        with self._lock:
            self.now = self.clock = clock
            self._core = core
            self._history = history
            self.products: list[ProductSpec] = listed
            self.looks: list[LookSpec] = looks
            self._by_id = {p.product_id: p for p in listed}
            self._looks_by_id = {lk.look_id: lk for lk in looks}
            # Per-request lookups by index, not by scanning the listing (a large store serves
            # tens of thousands of requests a crawl).
            self._by_shape = {shape: [p for p in listed if p.shape == shape] for shape in pages.SHOP_PATHS}
            self._by_slug: dict[tuple[str, str], ProductSpec] = {}
            for p in listed:
                self._by_slug.setdefault((p.shape, p.slug), p)

    def by_slug(self, shape: str, slug: str) -> ProductSpec | None:
        """The first listed product of `shape` with `slug` (listing order)."""
        return self._by_slug.get((shape, slug))

    def spec_of(self, product_id: str) -> ProductSpec | None:
        """Any product the store ever published by `clock`, listed or not (near copies need it)."""
        found = self._history.get(product_id)
        if found is not None or not product_id.isdigit() or int(product_id) < 2000:
            return found
        n = int(product_id) - 2000
        if n >= arrivals_until(self.clock, self.products_per_week):
            return None
        return arrival(n, self.products_per_week, self.clock, self._core, self.revision)

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._server.server_address[0]}:{self.port}"

    def start(self) -> SampleStore:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="sample-store", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> SampleStore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (the `sample-store` command)."""
        try:
            self._server.serve_forever()
        finally:
            self._server.server_close()

    # ------------------------------------------------------------------ ground truth
    def catalog(self) -> list[dict[str, Any]]:
        """Ground truth per product: ids, URLs, category and attribute values, expected price.

        Attribute values use the store's vocabulary (`category`, `attributes`); when the
        taxonomy module is present, `taxonomy_category` / `taxonomy_attributes` give them in
        taxonomy values (normalized through `Taxonomy.normalize_*`).
        """
        base = self.base_url
        taxonomy = _taxonomy()
        out = []
        for p in self.products:
            entry: dict[str, Any] = {
                "product_id": p.product_id,
                "site": _site_of(p.shape),
                "platform": p.shape,
                "url": f"{base}{pages.product_path(p)}",
                "title": p.title,
                "brand": p.brand,
                "category": p.category,
                "attributes": p.attributes,
                "price": str(pages.expected_price(p)),
                "image_urls": [f"{base}{path}" for path in pages.image_paths(p)],
                "broken_image_urls": [f"{base}{path}" for path in p.broken_images],
                "published_at": p.published_at.isoformat(),
                "updated_at": p.updated_at.isoformat(),
                "in_stock": p.in_stock,
                "arrival": p.arrival,
                "removed_at": p.removed_at.isoformat() if p.removed_at else None,
            }
            if taxonomy is not None:
                entry.update(_taxonomy_view(taxonomy, p))
            out.append(entry)
        return out

    def looks_truth(self) -> list[dict[str, Any]]:
        base = self.base_url
        return [
            {
                "look_id": look.look_id,
                "url": f"{base}/looks/{look.look_id}",
                "photo_url": f"{base}/img/looks/{look.look_id}.jpg",
                "product_urls": [f"{base}{pages.product_path(p)}" for p in look.products],
                "product_ids": [p.product_id for p in look.products],
                "boxes": [list(b) for b in self.look_boxes(look)],
                "published_at": look.published_at.isoformat(),
            }
            for look in self.looks
        ]

    def broken_images(self) -> dict[str, str]:
        return {f"{self.base_url}{path}": why for path, why in BROKEN_IMAGES.items()}

    # ------------------------------------------------------------------ content
    def image(self, key: str, make: Any) -> bytes:
        with self._lock:
            data = self._images.get(key)
            if data is not None:
                self._images.move_to_end(key)
        if data is None:
            data = make()
            with self._lock:
                self._images[key] = data
                while len(self._images) > IMAGE_CACHE:
                    self._images.popitem(last=False)
        return data

    def photo(self, product: ProductSpec, view: int) -> bytes:
        """Photo `view` of a product; a near copy's last photo is an older product's photo, altered."""
        if product.near_copy is not None and view == product.photos - 1:
            older_id, older_view, transform = product.near_copy
            with contextlib.suppress(KeyError):
                return drawing.near_copy(self.original_photo(older_id, older_view), transform)
        return drawing.product_photo(product, view)

    def published_between(self, start: dt.datetime, end: dt.datetime) -> list[ProductSpec]:
        """Products first published in (start, end], as the store showed them at `end`
        (those removed since included): what a crawl at `end` of a window could have found."""
        return [p for p in self._history.values() if start < p.published_at <= min(end, self.clock)]

    def original_photo(self, product_id: str, view: int) -> bytes:
        """The first-round photo `view` of any product the store has published (even removed)."""
        spec = self.spec_of(product_id)
        if spec is None:
            raise KeyError(product_id)
        return self.image(f"p/{product_id}/{view}", lambda: drawing.product_photo(spec, view, photo_round=0))

    def near_copies(self) -> list[dict[str, Any]]:
        """Listed photos that re-upload an older product's photo: (photo URL, original URL, how)."""
        base = self.base_url
        out = []
        for p in self.products:
            if p.near_copy is not None:
                older_id, older_view, transform = p.near_copy
                out.append(
                    {
                        "product_id": p.product_id,
                        "url": f"{base}{pages.image_paths(p)[p.photos - 1]}",
                        "original_product_id": older_id,
                        "original_url": f"{base}/img/p/{older_id}/{older_view}.jpg",
                        "transform": transform,
                    }
                )
        return out

    def look_boxes(self, look: LookSpec) -> list[tuple[int, int, int, int]]:
        if look.look_id not in self._look_boxes:
            self._look_photo(look)
        return self._look_boxes[look.look_id]

    def _look_photo(self, look: LookSpec) -> bytes:
        def make() -> bytes:
            # Monthly looks get their own scene; the five core looks keep the plain one.
            variation = look.look_id if look.look_id.startswith("look-20") else None
            data, boxes = drawing.look_photo(look.products, variation)
            self._look_boxes[look.look_id] = boxes
            return data

        return self.image(f"look/{look.look_id}", make)


def _site_of(shape: str) -> str:
    return {
        "shopify": "sample-shopify",
        "woocommerce": "sample-woo",
        "schema_org": "sample-schema",
        "playwright": "sample-js",
    }[shape]


def _taxonomy() -> Any:
    try:
        from lookbench_live.schema.taxonomy import default_taxonomy
    except ImportError:
        return None
    try:
        return default_taxonomy()
    except Exception:
        return None


def _taxonomy_view(taxonomy: Any, p: ProductSpec) -> dict[str, Any]:
    try:
        category = taxonomy.normalize_category(p.category)
    except Exception:
        category = None
    attributes: dict[str, str] = {}
    for group, value in p.attributes.items():
        try:
            normalized = taxonomy.normalize_value(group, value)
        except Exception:
            normalized = None
        if normalized:
            attributes[group] = normalized
    return {"taxonomy_category": category, "taxonomy_attributes": attributes}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (a killed crawl, a timed-out ingester) are normal here.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    store: SampleStore
    protocol_version = "HTTP/1.1"
    server_version = "sample-store/1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read `hits`
        return

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        store = self.store
        with store._lock:
            store.hits.append(self.path)
        if store.latency:
            time.sleep(store.latency)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route()

    # ------------------------------------------------------------------ helpers
    def _send(
        self, status: int, body: bytes | str, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _html(self, body: str, status: int = 200) -> None:
        self._send(status, body, "text/html; charset=utf-8")

    def _json(self, payload: Any) -> None:
        self._send(200, json.dumps(payload), "application/json; charset=utf-8")

    def _xml(self, body: str) -> None:
        self._send(200, body, "application/xml; charset=utf-8")

    def _jpeg(self, data: bytes, headers: dict[str, str] | None = None) -> None:
        self._send(200, data, "image/jpeg", headers)

    def _not_found(self) -> None:
        self._html("<html><body><h1>Not found</h1></body></html>", 404)

    # ------------------------------------------------------------------ routes
    def _route(self) -> None:
        store = self.store
        base = store.base_url
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        shape_products = store._by_shape
        if path == "/robots.txt":
            self._send(
                200,
                f"User-agent: *\nDisallow: /schema/private/\n\nSitemap: {base}/schema/sitemap_index.xml\n",
                "text/plain",
            )
        elif path == "/":
            links = "".join(
                f'<li><a href="{p}">{p}</a></li>'
                for p in (
                    "/shopify/products.json",
                    "/woo/wp-json/wc/store/v1/products",
                    "/schema/sitemap_index.xml",
                    "/js/",
                    "/looks/",
                )
            )
            self._html(f"<html><body><h1>lookbench-live sample store</h1><ul>{links}</ul></body></html>")
        # -------------------------------------------------------------- Shopify
        elif path.startswith("/shopify/"):
            self._shopify(path, query, shape_products["shopify"], base)
        # -------------------------------------------------------------- WooCommerce
        elif path in ("/woo/wp-json/wc/store/v1/products", "/woo/wp-json/wc/store/products"):
            per_page = _int(query.get("per_page"), 10, 1, 100)
            page = _int(query.get("page"), 1, 1, 10_000)
            chunk = shape_products["woocommerce"][(page - 1) * per_page : page * per_page]
            self._json([pages.woo_product(p, base) for p in chunk])
        elif path.startswith("/woo/product/"):
            slug = path.split("/")[3]
            found = store.by_slug("woocommerce", slug)
            self._html(pages.simple_product_page(found, base)) if found else self._not_found()
        # -------------------------------------------------------------- schema.org
        elif path.startswith("/schema/"):
            self._schema(path, shape_products["schema_org"], base)
        # -------------------------------------------------------------- JavaScript
        elif path in ("/js", "/js/"):
            self._html(pages.js_listing(shape_products["playwright"]))
        elif path.startswith("/js/p/"):
            found = store.by_slug("playwright", path[len("/js/p/") :])
            self._html(pages.js_page(found, base)) if found else self._not_found()
        # -------------------------------------------------------------- looks
        elif path in ("/looks", "/looks/"):
            links = "".join(
                f'<li><a href="/looks/{look.look_id}">{look.title}</a></li>' for look in store.looks
            )
            self._html(
                f"<html><head><title>Looks</title></head><body><ul class='looks-index'>{links}</ul></body></html>"
            )
        elif path.startswith("/looks/"):
            look = store._looks_by_id.get(path[len("/looks/") :])
            self._html(pages.look_page(look, base, store.look_boxes(look))) if look else self._not_found()
        # -------------------------------------------------------------- images
        elif path.startswith("/img/"):
            self._image(path)
        else:
            self._not_found()

    def _shopify(
        self, path: str, query: dict[str, list[str]], products: list[ProductSpec], base: str
    ) -> None:
        limit = _int(query.get("limit"), 30, 1, MAX_PAGE_SIZE)
        page = _int(query.get("page"), 1, 1, 10_000)
        if path == "/shopify/products.json":
            chosen = products
        elif path.startswith("/shopify/collections/") and path.endswith("/products.json"):
            handle = path.split("/")[3]
            if handle == "women":
                chosen = [p for p in products if p.category in ("dress", "skirt", "shirt", "t-shirt")]
            elif handle == "all":
                chosen = products
            else:
                return self._not_found()
        elif path.startswith("/shopify/products/"):
            handle = path[len("/shopify/products/") :]
            as_json = handle.endswith(".json")
            found = self.store.by_slug("shopify", handle.removesuffix(".json"))
            if found is None:
                return self._not_found()
            if as_json:
                return self._json({"product": pages.shopify_product(found, base)})
            return self._html(pages.simple_product_page(found, base))
        else:
            return self._not_found()
        chunk = chosen[(page - 1) * limit : page * limit]
        self._json({"products": [pages.shopify_product(p, base) for p in chunk]})

    def _schema(self, path: str, products: list[ProductSpec], base: str) -> None:
        store = self.store
        if path == "/schema/sitemap_index.xml":
            entries = [
                (f"{base}/schema/sitemap-products.xml", store.now.date().isoformat()),
                (f"{base}/schema/sitemap-looks.xml", None),
                (f"{base}/schema/sitemap-empty.xml", None),
                (f"{base}/schema/sitemap_index.xml", None),
            ]  # fmt: skip  (lists itself: a cycle)
            self._xml(pages.sitemap_index(entries))
        elif path == "/schema/sitemap-products.xml":
            entries = [(f"{base}{pages.product_path(p)}", p.updated_at.isoformat()) for p in products]
            recent = store.now.isoformat()
            entries += [
                (f"{base}/schema/private/unreleased-dress", recent),  # disallowed by robots.txt
                (f"{base}/schema/p/gone", recent),  # 404
                (f"{base}/schema/p/flaky", recent),  # 503 every time
                (f"{base}/schema/p/no-product", recent),  # a page without product data
                ("http://offsite.invalid/p/elsewhere", recent),  # another host: offsite
                (f"{base}/schema/p/latin1-mislabelled", recent),  # UTF-8 with BOM, header says latin-1
                ("", recent),
            ]
            self._xml(pages.urlset(entries))
        elif path == "/schema/sitemap-looks.xml":
            self._xml(
                pages.urlset(
                    [(f"{base}/looks/{lk.look_id}", lk.published_at.isoformat()) for lk in store.looks]
                )
            )
        elif path == "/schema/sitemap-empty.xml":
            self._send(200, b"", "application/xml")
        elif path == "/schema/p/gone":
            self._not_found()
        elif path == "/schema/p/flaky":
            self._html("<html><body>Service unavailable</body></html>", 503)
        elif path == "/schema/p/no-product":
            self._html(
                "<html><head><title>About us</title></head><body><p>We sell clothes.</p></body></html>"
            )
        elif path == "/schema/p/latin1-mislabelled":
            page = ('<html><head><script type="application/ld+json">{"@type": "Product", "sku": "latin1", "name": "Crêpe Blouse — Écru",'
                    '"offers": {"price": "49.00", "priceCurrency": "EUR"}}</script></head><body></body></html>')  # fmt: skip
            self._send(200, b"\xef\xbb\xbf" + page.encode("utf-8"), "text/html; charset=iso-8859-1")
        elif path.startswith("/schema/private/"):
            self._html("<html><body>This page must never be fetched by a polite crawler.</body></html>")
        elif path.startswith("/schema/p/"):
            found = store.by_slug("schema_org", path[len("/schema/p/") :])
            self._html(pages.schema_page(found, base)) if found else self._not_found()
        else:
            self._not_found()

    def _image(self, path: str) -> None:
        store = self.store
        parts = path.split("/")
        if path.startswith("/img/p/") and len(parts) == 5:
            product = store._by_id.get(parts[3])
            name = parts[4].removesuffix(".jpg")
            if product is None or f"/img/p/{product.product_id}/{parts[4]}" not in pages.image_paths(product):
                return self._not_found()  # unknown, removed, or a photo the product no longer shows
            view = int(name.rsplit("-", 1)[-1])
            return self._jpeg(
                store.image(f"p/{product.product_id}/{name}", lambda: store.photo(product, view))
            )
        if path.startswith("/img/looks/"):
            look = store._looks_by_id.get(path[len("/img/looks/") :].removesuffix(".jpg"))
            return self._jpeg(store._look_photo(look)) if look else self._not_found()
        first = store.products[0]
        if path == "/img/broken/truncated.jpg":
            return self._jpeg(store.image("truncated", lambda: drawing.truncated_jpeg(first)))
        if path == "/img/broken/empty.jpg":
            return self._jpeg(b"")
        if path == "/img/broken/page.jpg":
            return self._jpeg(b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>")
        if path == "/img/broken/bomb.png":
            return self._send(200, drawing.png_bomb_header(), "image/png")
        if path == "/img/broken/noai.jpg":
            return self._jpeg(
                store.image("noai", lambda: drawing.product_photo(store.products[1], 1)),
                {"X-Robots-Tag": "noai"},
            )
        if path == "/img/broken/wide.jpg":
            return self._jpeg(store.image("wide", drawing.extreme_aspect_jpeg))
        if path == "/img/broken/loop.jpg":
            self.send_response(302)
            self.send_header("Location", "/img/broken/loop2.jpg")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if path == "/img/broken/loop2.jpg":
            self.send_response(302)
            self.send_header("Location", "/img/broken/loop.jpg")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if path == "/img/broken/slow.jpg":
            data = store.image("slow", lambda: drawing.product_photo(first, 0))
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            # One byte a second, bounded (5 minutes) so a forgotten client cannot pin a thread forever.
            for i in range(min(len(data), 300)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                time.sleep(1.0)
            return None
        return self._not_found()


def _int(values: list[str] | None, default: int, low: int, high: int) -> int:
    try:
        value = int(values[0]) if values else default
    except ValueError:
        value = default
    return max(low, min(high, value))
