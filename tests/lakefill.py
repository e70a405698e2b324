"""Fill a lake with a small, fully known content, as the stages would have written it.

Used by the release, query and flow tests so they do not depend on crawling or models.
"""

from __future__ import annotations

import datetime as dt
import io
import json

import factories
from PIL import Image, ImageDraw

from lookbench_live.schema.hashing import hash_image
from lookbench_live.schema.records import (
    Annotation,
    BoxSource,
    ImageRecord,
    Look,
    product_key,
)
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
COLORS = ["red", "blue", "green", "black", "white", "yellow", "purple", "orange", "pink", "brown"]
CATEGORIES = ["dress", "coat", "skirt", "shirt"]
MATERIALS = ["leather", "denim", "cotton", "silk"]


def draw(seed: int, size: tuple[int, int] = (160, 200)) -> bytes:
    """A distinct JPEG per seed: a coloured garment-like shape with a seed-specific pattern."""
    img = Image.new("RGB", size, (240, 240, 240))
    d = ImageDraw.Draw(img)
    color = [(200, 30, 30), (30, 30, 200), (30, 160, 30), (20, 20, 20), (220, 180, 20)][seed % 5]
    d.polygon([(40, 20), (120, 20), (150, 190), (10, 190)], fill=color)
    for i in range(seed % 7 + 2):
        y = 30 + (i * 37 + seed * 13) % 150
        d.rectangle(
            [20 + (seed * 7) % 40, y, 140 - (seed * 3) % 30, y + 6], fill=(255 - color[0], 255 - color[1], 90)
        )
    out = io.BytesIO()
    img.save(out, "JPEG", quality=90)
    return out.getvalue()


def _image(
    lake: Lake, data: bytes, *, kind: str, owner: str, source: str, url: str, pos: int, seen: dt.datetime
):
    sha = lake.put_image(data)
    img = Image.open(io.BytesIO(data))
    h = hash_image(img)
    return ImageRecord(
        source_url=url,
        owner_kind=kind,
        owner_id=owner,
        source=source,
        position=pos,
        status="ok",
        sha256=sha,
        width=img.width,
        height=img.height,
        format=img.format,
        byte_size=len(data),
        phash=h.phash,
        phash_mirror=h.phash_mirror,
        dhash=h.dhash,
        hash_method=h.method,
        fetched_at=seen,
        first_seen_at=seen,
    )


def _ann(
    sha: str,
    category: str,
    attrs: dict[str, str],
    *,
    bbox: str = "",
    item_ref: str | None = None,
    bbox_source: BoxSource | None = None,
) -> Annotation:
    return Annotation(
        sha256=sha,
        bbox=bbox,
        task="attributes",
        taxonomy_version="test",
        prompt_version="p1",
        model="metadata-prior",
        source="metadata_prior",
        status="ok",
        category=category,
        main_attribute=attrs["material"],
        attributes=attrs,
        item_ref=item_ref,
        bbox_source=bbox_source,
    )


def fill(
    lake: Lake,
    *,
    products: int = 12,
    looks: int = 2,
    start: dt.datetime = T0,
    seed: int = 0,
    look_refs: str = "keys",
) -> dict:
    """Write products (3 photos each), looks (a photo showing 2 products), and AIGen items.

    `look_refs="urls"` states a look's products as their page URLs, as the crawler writes them.
    """
    rows_p, rows_i, rows_a, rows_d, rows_l, rows_g = [], [], [], [], [], []
    keys = []
    for n in range(products):
        seen = start + dt.timedelta(hours=n)
        pid = f"p{seed}-{n}"
        key = product_key("shop", pid)
        keys.append(key)
        cat, mat = CATEGORIES[n % 4], MATERIALS[(n // 4) % 4]
        attrs = {"color": COLORS[n % 10], "material": mat}
        urls = [f"https://shop.example/img/{pid}-{k}.jpg" for k in range(3)]
        rows_p.append(
            factories.product(pid, title=f"{attrs['color']} {mat} {cat}", images=urls, first_seen_at=seen)
        )
        for k, url in enumerate(urls):
            rec = _image(
                lake,
                draw(1000 * seed + 10 * n + k),
                kind="product",
                owner=key,
                source="shop",
                url=url,
                pos=k,
                seen=seen,
            )
            rows_i.append(rec)
            rows_d.append(factories.kept(rec))
            rows_a.append(_ann(rec.sha256, cat, attrs))
    for m in range(looks):
        seen = start + dt.timedelta(days=1, hours=m)
        shown = keys[2 * m : 2 * m + 2]
        photo = Image.new("RGB", (320, 240), (200, 200, 200))
        for j, key in enumerate(shown):
            n = keys.index(key)
            part = Image.open(io.BytesIO(draw(1000 * seed + 10 * n)))
            photo.paste(part, (j * 160, 20))
        buf = io.BytesIO()
        photo.save(buf, "JPEG", quality=90)
        look_id = f"look{seed}-{m}"
        owner = f"shop:{look_id}"
        boxes = [{"ref": key, "bbox": [j * 160, 20, j * 160 + 160, 220]} for j, key in enumerate(shown)]
        rows_l.append(
            Look(
                look_id=look_id,
                source="shop",
                url=f"https://shop.example/look/{m}",
                photo_url=f"https://shop.example/look/{m}.jpg",
                product_refs=shown
                if look_refs == "keys"
                else [f"https://shop.example/p/{k.split(':', 1)[1]}" for k in shown],
                boxes_json=json.dumps(boxes),
                first_seen_at=seen,
            )
        )
        rec = _image(
            lake,
            buf.getvalue(),
            kind="look",
            owner=owner,
            source="shop",
            url=f"https://shop.example/look/{m}.jpg",
            pos=0,
            seen=seen,
        )
        rows_i.append(rec)
        rows_d.append(factories.kept(rec))
        for box in boxes:
            n = keys.index(box["ref"])
            attrs = {"color": COLORS[n % 10], "material": MATERIALS[(n // 4) % 4]}
            rows_a.append(
                _ann(
                    rec.sha256,
                    CATEGORIES[n % 4],
                    attrs,
                    bbox=",".join(map(str, box["bbox"])),
                    item_ref=box["ref"],
                )
            )
    # AIGen: one studio item (query + 2 gallery) and one street look of two items
    gen_specs = [
        ("aigen_studio", "query", ["aigen:s1"], 1),
        ("aigen_studio", "gallery", ["aigen:s1"], 2),
        ("aigen_studio", "gallery", ["aigen:s1"], 3),
        ("aigen_streetlook", "query", ["aigen:a", "aigen:b"], 4),
        ("aigen_streetlook", "gallery", ["aigen:a"], 5),
        ("aigen_streetlook", "gallery", ["aigen:b"], 6),
    ]
    for subset, role, items, s in gen_specs:
        gid = f"{seed:02d}{s:062d}"
        seen = start + dt.timedelta(days=2)
        data = draw(50_000 + 100 * seed + s, size=(128, 128))
        rec = _image(
            lake,
            data,
            kind="generation",
            owner=gid,
            source="generation",
            url=f"generated://{gid}",
            pos=0,
            seen=seen,
        )
        rows_i.append(rec)
        rows_d.append(factories.kept(rec))
        rows_g.append(
            factories.generation(
                gid,
                subset=subset,
                role=role,
                item_ids=items,
                model_is_tiny_local=True,
                prompt="a red leather dress",
                seed=s,
                width=128,
                height=128,
                scheduler="PNDM",
                sha256=rec.sha256,
                first_seen_at=seen,
            )
        )
        attrs = {"color": "red", "material": "leather"}
        if subset == "aigen_streetlook" and role == "query":
            # A composed scene's layout boxes (generation/compose.py): what located them.
            rows_a.append(
                _ann(rec.sha256, "dress", attrs, bbox="0,0,64,128", item_ref="aigen:a", bbox_source="layout")
            )
            rows_a.append(
                _ann(rec.sha256, "coat", attrs, bbox="64,0,128,128", item_ref="aigen:b", bbox_source="layout")
            )
        else:
            rows_a.append(_ann(rec.sha256, "dress" if items != ["aigen:b"] else "coat", attrs))
    for batch in (rows_p, rows_l, rows_i, rows_d, rows_a, rows_g):
        lake.append(batch)
    return {"products": keys}
