"""`run_dedup` on a real lake: which copies are dropped, why, against what, and only once."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from lookbench_live.config import DedupSettings
from lookbench_live.dedup import run_dedup
from lookbench_live.dedup.known import KnownDatasetError, hash_files, write_hash_file
from lookbench_live.schema.hashing import HASH_METHOD, hamming, hash_bytes
from lookbench_live.schema.records import ImageRecord
from lookbench_live.testing.calibration import GarmentSpec, draw_garment, jpeg, transform
from lookbench_live.warehouse.lake import Lake

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
SIZE = (400, 500)
# Three distinct navy dresses of one silhouette (pattern and neckline differ): the hard negatives.
DRESSES = [
    GarmentSpec("dress", "navy", "stripes", "round", "short", 0.95, seed=11),
    GarmentSpec("dress", "navy", "dots", "v", "short", 0.95, seed=12),
    GarmentSpec("dress", "navy", "plaid", "square", "short", 0.95, seed=13),
]


def photo(k: int) -> Image.Image:
    return draw_garment(DRESSES[k], SIZE)


def add(
    lake: Lake,
    data: bytes,
    owner: str,
    *,
    hours: float = 0,
    kind: str = "product",
    source: str = "shop",
    method: str | None = None,
) -> str:
    sha = lake.put_image(data)
    hashes = hash_bytes(data)
    with Image.open(io.BytesIO(data)) as img:
        width, height = img.size
    seen = T0 + dt.timedelta(hours=hours)
    lake.append(
        [
            ImageRecord(
                source_url=f"https://shop.example/{owner}/{sha[:8]}.jpg",
                owner_kind=kind,
                owner_id=owner,
                source=source,
                status="ok",
                sha256=sha,
                width=width,
                height=height,
                format="JPEG",
                byte_size=len(data),
                phash=hashes.phash,
                phash_mirror=hashes.phash_mirror,
                dhash=hashes.dhash,
                hash_method=method or hashes.method,
                fetched_at=seen,
                first_seen_at=seen,
            )
        ]
    )
    return sha


def decisions(lake: Lake) -> dict[str, dict]:
    return {row["sha256"]: row for row in lake.read("dedup_decisions").to_pylist()}


def test_copies_dropped_distinct_garments_kept_and_rerun_is_a_no_op(lake: Lake) -> None:
    original = add(lake, jpeg(photo(0)), "shop:a", hours=0)
    copies = {
        name: add(lake, transform(photo(0), name), f"shop:copy-{name}", hours=1 + i)
        for i, name in enumerate(
            ["resize50", "resize150", "jpeg30", "jpeg75", "mirror", "resize50+jpeg50", "mirror+jpeg75"]
        )
    }
    distinct = [add(lake, jpeg(photo(k)), f"shop:other-{k}", hours=10 + k) for k in (1, 2)]
    # The same bytes under a second product: one decision, the second owner listed as its duplicate.
    assert add(lake, jpeg(photo(0)), "shop:reposted", hours=20) == original

    result = run_dedup(lake, DedupSettings(), "run-1")
    got = decisions(lake)
    assert set(got) == {original, *copies.values(), *distinct}
    assert got[original]["decision"] == "kept"
    assert got[original]["canonical_owner_id"] == "shop:a"
    assert got[original]["duplicate_owners"] == ["product:shop:reposted"]
    for name, sha in copies.items():
        row = got[sha]
        assert (name, row["decision"], row["reason"], row["matched_sha256"]) == (
            name,
            "dropped",
            "near_in_run",
            original,
        )
        assert 0 <= row["distance"] <= DedupSettings().radius
        assert row["matched_ref"] == "run:run-1"
    for sha in distinct:
        assert got[sha]["decision"] == "kept"
    assert (result.pending, result.kept, result.dropped, result.written) == (10, 3, {"near_in_run": 7}, 10)

    before = lake.read("dedup_decisions")
    again = run_dedup(lake, DedupSettings(), "run-2")
    assert (again.pending, again.written) == (0, 0)
    assert lake.read("dedup_decisions").equals(before)


def test_canonical_image_is_earliest_then_largest(lake: Lake) -> None:
    big = transform(photo(1), "resize150")
    small = jpeg(photo(1))
    later_big = add(lake, big, "shop:x", hours=5)
    earlier_small = add(lake, small, "shop:y", hours=1)
    run_dedup(lake, DedupSettings(), "r")
    got = decisions(lake)
    assert got[earlier_small]["decision"] == "kept"
    assert got[later_big]["matched_sha256"] == earlier_small

    other = Lake(lake.home + "-tie")
    a = add(other, big, "shop:x", hours=1)
    b = add(other, small, "shop:y", hours=1)  # same first_seen_at: the larger image wins
    run_dedup(other, DedupSettings(), "r")
    assert decisions(other)[a]["decision"] == "kept"
    assert decisions(other)[b]["reason"] == "near_in_run"


def test_new_images_never_displace_earlier_decisions(lake: Lake) -> None:
    first = add(lake, jpeg(photo(2)), "shop:late", hours=50)
    run_dedup(lake, DedupSettings(), "run-1")
    # Seen "earlier" by its timestamp but arriving in a later run: the earlier decision stands.
    second = add(lake, transform(photo(2), "jpeg50"), "shop:early", hours=0)
    result = run_dedup(lake, DedupSettings(), "run-2")
    got = decisions(lake)
    assert got[first]["decision"] == "kept" and got[first]["run_id"] == "run-1"
    assert (got[second]["reason"], got[second]["matched_ref"]) == ("near_in_run", "run:run-1")
    assert result.references == 1 and result.written == 1


def write_release(lake: Lake, version: str, images: list[bytes]) -> None:
    """A committed release as `warehouse.release` reads it: manifest.json plus one gallery file."""
    import hashlib

    shas = [hashlib.sha256(b).hexdigest() for b in images]
    table = pa.table(
        {
            "image": pa.array(
                [{"bytes": b, "path": f"{s}.jpg"} for b, s in zip(images, shas, strict=True)],
                pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
            ),
            "item_ID": [f"shop:old-{i}" for i in range(len(images))],
            "sha256": shas,
            "raw_sha256": shas,
        }
    )
    base = Path(lake.root) / "releases" / version
    (base / "real_studio_flat").mkdir(parents=True)
    pq.write_table(table, base / "real_studio_flat" / "gallery.parquet")
    (base / "manifest.json").write_text(
        json.dumps({"version": version, "files": {"real_studio_flat/gallery.parquet": {"rows": len(images)}}})
    )


def test_copy_of_an_earlier_release_is_dropped(lake: Lake) -> None:
    released = jpeg(photo(0))
    write_release(lake, "v20261001", [released])  # its images are not in this lake's tables
    copy = add(lake, transform(photo(0), "resize75"), "shop:new", hours=1)
    same_bytes = add(lake, released, "shop:reupload", hours=2)
    fresh = add(lake, jpeg(photo(1)), "shop:fresh", hours=3)
    result = run_dedup(lake, DedupSettings(), "run-1")
    got = decisions(lake)
    assert (got[copy]["reason"], got[copy]["matched_ref"]) == ("near_earlier_release", "v20261001")
    assert got[copy]["matched_sha256"] == same_bytes
    assert (got[same_bytes]["reason"], got[same_bytes]["matched_ref"], got[same_bytes]["distance"]) == (
        "exact",
        "v20261001",
        0,
    )
    assert got[fresh]["decision"] == "kept"
    assert result.dropped == {"near_earlier_release": 1, "exact": 1}


def test_release_images_absent_from_the_lake_are_hashed_from_the_release(lake: Lake) -> None:
    import hashlib

    released = transform(photo(1), "jpeg90")
    write_release(lake, "v20260901", [released])
    copy = add(lake, transform(photo(1), "resize50"), "shop:new")
    result = run_dedup(lake, DedupSettings(), "run-1")
    row = decisions(lake)[copy]
    assert (row["reason"], row["matched_ref"]) == ("near_earlier_release", "v20260901")
    assert row["matched_sha256"] == hashlib.sha256(released).hexdigest()
    assert result.references == 1


def test_known_dataset_guard(lake: Lake, tmp_path: Path) -> None:
    dataset = tmp_path / "fashion200k"
    (dataset / "women").mkdir(parents=True)
    (dataset / "women" / "a.jpg").write_bytes(jpeg(photo(0)))
    (dataset / "women" / "broken.jpg").write_bytes(b"not an image")
    hashed = hash_files([dataset])
    assert hashed.table.column("method").to_pylist() == [HASH_METHOD]
    assert [Path(p).name for p, _ in hashed.failures] == ["broken.jpg"]
    hash_file = tmp_path / "known.parquet"
    write_hash_file(hashed.table, hash_file)

    leaked = add(lake, transform(photo(0), "jpeg50"), "shop:leak")
    clean = add(lake, jpeg(photo(1)), "shop:clean", hours=1)
    settings = DedupSettings(known_dataset_hashes=[str(hash_file)])
    result = run_dedup(lake, settings, "run-1")
    got = decisions(lake)
    assert got[leaked]["reason"] == "known_dataset"
    assert got[leaked]["matched_ref"].endswith("women/a.jpg")
    assert got[clean]["decision"] == "kept"
    assert result.known_hashes == 1


def test_hash_file_of_another_method_is_refused(lake: Lake, tmp_path: Path) -> None:
    table = hash_files([_write(tmp_path / "x.jpg", jpeg(photo(0)))]).table
    other = table.set_column(4, "method", pa.array(["phash/plain-decode/v0"]))
    bad = tmp_path / "other.parquet"
    write_hash_file(other, bad)
    add(lake, jpeg(photo(0)), "shop:a")
    with pytest.raises(KnownDatasetError, match=r"phash/plain-decode/v0.*never compared"):
        run_dedup(lake, DedupSettings(known_dataset_hashes=[str(bad)]), "run-1")
    assert lake.read("dedup_decisions").num_rows == 0  # nothing half-decided


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_opt_out_and_unhashable_images(lake: Lake) -> None:
    opted = add(lake, jpeg(photo(0)), "optout:p1", source="optout")
    # Bytes that are not an image, stored with hashes of an old method: rehashing fails, so the
    # image waits undecided with a countable rejection instead of crashing the run.
    broken = lake.put_image(b"\x00garbage")
    lake.append(
        [
            ImageRecord(
                source_url="u",
                owner_kind="product",
                owner_id="shop:b",
                source="shop",
                status="ok",
                sha256=broken,
                phash="0" * 16,
                phash_mirror="0" * 16,
                dhash="0" * 16,
                hash_method="old-method",
                fetched_at=T0,
                first_seen_at=T0,
            )
        ]
    )
    result = run_dedup(lake, DedupSettings(opt_out_sources=["optout"]), "run-1")
    got = decisions(lake)
    assert got[opted]["reason"] == "opt_out"
    assert broken not in got
    assert result.unhashable == 1
    rejections = lake.read("rejections").to_pylist()
    assert [(r["stage"], r["item"], r["reason"]) for r in rejections] == [("dedup", broken, "unhashable")]


def test_hashes_of_an_old_method_are_recomputed_not_compared(lake: Lake) -> None:
    original = add(lake, jpeg(photo(1)), "shop:a")
    # A stored hash from another method that happens to collide must not decide anything.
    stale = add(lake, jpeg(photo(2)), "shop:b", hours=1, method="old-method")
    lake.append([])  # no-op
    result = run_dedup(lake, DedupSettings(), "run-1")
    got = decisions(lake)
    assert got[original]["decision"] == got[stale]["decision"] == "kept"
    assert got[stale]["hash_method"] == HASH_METHOD
    assert result.unhashable == 0


def test_a_products_distinct_views_survive_but_its_copies_do_not(lake: Lake) -> None:
    front = jpeg(photo(0))
    back_spec = GarmentSpec(**{**{n: getattr(DRESSES[0], n) for n in GarmentSpec.__slots__}, "view": "back"})
    back = jpeg(draw_garment(back_spec, SIZE))
    a, b = hash_bytes(front), hash_bytes(back)
    distance = min(hamming(a.phash, b.phash), hamming(a.phash, b.phash_mirror))
    # A near-identical view (within the cross-owner radius) of one product: the case the rule is for.
    settings = DedupSettings(radius=max(distance, DedupSettings().radius))
    f = add(lake, front, "shop:dress")
    k = add(lake, back, "shop:dress", hours=1)
    copy = add(lake, transform(photo(0), "resize50"), "shop:dress", hours=2)
    run_dedup(lake, settings, "run-1")
    got = decisions(lake)
    assert got[k]["decision"] == got[f]["decision"] == "kept"
    assert (got[copy]["reason"], got[copy]["matched_sha256"]) == ("near_in_run", f)
    # The same two photos under two different products are the contamination case.
    other = Lake(lake.home + "-cross")
    add(other, front, "shop:dress")
    k2 = add(other, back, "shop:another", hours=1)
    run_dedup(other, settings, "run-1")
    assert decisions(other)[k2]["reason"] == "near_in_run"
