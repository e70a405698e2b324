"""Month after month on one lake with the embedded default (the living sample store).

The scheduled refresh runs for three consecutive months, skips one, and runs again; a copy of
the lake is killed (SIGKILL) during month two and rerun. Every check reads what a user gets:
the committed release files, their manifests, and the lake's decisions.
"""

from __future__ import annotations

import datetime as dt
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_flows import KILLER

from lookbench_live.config import Settings
from lookbench_live.schema.hashing import hash_bytes
from lookbench_live.schema.moments import parse_moment
from lookbench_live.schema.release import FILES, SUBSETS
from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import committed_versions, read_manifest, verify_release

# Seven refreshes on 2 shared cores: far over the suite-wide 600 s timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

MONTHS = ("2026-09-01", "2026-10-01", "2026-11-01", "2027-01-01")  # December is skipped
VERSIONS = tuple("v" + m.replace("-", "") for m in MONTHS)
PORT = 48871
RADIUS = Settings().dedup.radius


def refresh(cli: str, home: Path, as_of: str, *, script: Path | None = None, stage: str = ""):
    command = [cli] if script is None else [sys.executable, str(script), stage]
    args = ["refresh", "--home", str(home), "--as-of", as_of, "--port", str(PORT)]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=900, start_new_session=script is not None
    )


def checksums(home: Path, version: str) -> dict[str, str]:
    files = read_manifest(Lake(home), version)["files"]
    return {rel: files[rel]["sha256"] for rel in FILES}


@pytest.fixture(scope="module")
def months(tmp_path_factory: pytest.TempPathFactory, cli: str) -> dict:
    """One lake through every month; a copy taken before month two, for the kill test."""
    base = tmp_path_factory.mktemp("months")
    home = base / "lake"
    runs = {}
    for as_of in MONTHS:
        if as_of == MONTHS[1]:
            shutil.copytree(home, base / "before-month-2")
        runs[as_of] = refresh(cli, home, as_of)
        assert runs[as_of].returncode == 0, f"{as_of}: {runs[as_of].stderr[-4000:]}"
    return {"home": home, "base": base, "runs": runs}


def _rows(home: Path, version: str, rel: str, columns: list[str]) -> list[dict]:
    return pq.read_table(Path(Lake(home).path("releases", version, rel)), columns=columns).to_pylist()


def test_every_month_exits_0_with_a_verified_full_release(months: dict) -> None:
    home = months["home"]
    assert committed_versions(Lake(home)) == list(VERSIONS)
    for version in VERSIONS:
        assert verify_release(Lake(home), version) == [], version
        rows = read_manifest(Lake(home), version)["rows"]
        for subset in SUBSETS:
            assert rows[f"{subset}/query.parquet"] > 0, f"{version}: {subset} has no query"
            assert rows[f"{subset}/gallery.parquet"] > 0, f"{version}: {subset} has no gallery"


def test_windows_follow_each_other_and_every_row_lies_in_its_window(months: dict) -> None:
    home = months["home"]
    # The first window starts one cadence before its as-of day (the freshness rules), never at
    # the beginning of time; each later one where the previous ended.
    first = parse_moment(MONTHS[0])
    assert first is not None
    previous_end = first - dt.timedelta(days=Settings().release.cadence_days)
    for version in VERSIONS:
        window = read_manifest(Lake(home), version)["window"]
        start, end = parse_moment(window["start"]), parse_moment(window["end"])
        assert start == previous_end, f"{version}: window starts at {start}, previous ended {previous_end}"
        assert end is not None and (start is None or start < end)
        previous_end = end
        for rel in FILES:
            for row in _rows(home, version, rel, ["first_seen_at", "sha256"]):
                seen = row["first_seen_at"]
                assert (start is None or seen >= start) and seen < end, f"{version}/{rel}: {row}"


def _images(home: Path, version: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for rel in FILES:
        for row in _rows(home, version, rel, ["sha256", "raw_sha256", "image", "raw_image"]):
            found[row["sha256"]] = row["image"]["bytes"]
            found[row["raw_sha256"]] = row["raw_image"]["bytes"]
    return found


def test_no_image_is_published_twice_not_even_as_a_near_copy(months: dict) -> None:
    home = months["home"]
    earlier_sha: dict[str, str] = {}
    earlier_own: list[int] = []
    earlier_mirror: list[int] = []
    earlier_names: list[str] = []
    for version in VERSIONS:
        images = _images(home, version)
        repeated = sorted(set(images) & set(earlier_sha))
        assert not repeated, f"{version} republishes {repeated[:3]} (first in {earlier_sha[repeated[0]]})"
        hashed = {sha: hash_bytes(data) for sha, data in images.items()}
        if earlier_own:
            own = np.array(earlier_own, dtype=np.uint64)
            mirror = np.array(earlier_mirror, dtype=np.uint64)
            for sha, h in hashed.items():
                q = np.uint64(int(h.phash, 16))
                dist = np.minimum(np.bitwise_count(own ^ q), np.bitwise_count(mirror ^ q))
                best = int(np.argmin(dist))
                assert int(dist[best]) > RADIUS, (
                    f"{version} image {sha} is {int(dist[best])} bits from {earlier_names[best]}"
                )
        for sha, h in hashed.items():
            earlier_sha[sha] = version
            earlier_own.append(int(h.phash, 16))
            earlier_mirror.append(int(h.phash_mirror, 16))
            earlier_names.append(f"{sha} of {version}")


def test_re_uploaded_photos_are_rejected_naming_the_earlier_release(months: dict) -> None:
    lake = Lake(months["home"])
    rows = lake.read("dedup_decisions", columns=["sha256", "reason", "matched_ref", "run_id"]).to_pylist()
    cross = [r for r in rows if r["reason"] in ("exact", "near_earlier_release")]
    assert cross, "no photo of a later month was caught as a copy of a published one"
    for row in cross:
        run_version = row["run_id"].split(":")[1]
        assert row["matched_ref"] in VERSIONS and row["matched_ref"] < run_version, row


def test_every_month_brings_new_aigen_rows(months: dict) -> None:
    home = months["home"]
    seen: set[str] = set()
    for version in VERSIONS:
        ids = set()
        for subset in ("aigen_studio", "aigen_streetlook"):
            for row in _rows(home, version, f"{subset}/query.parquet", ["provenance"]):
                ids.add(row["provenance"])
        assert ids and not ids & seen, f"{version}: no new AIGen query"
        seen |= ids


def test_rerunning_a_month_changes_nothing(months: dict, cli: str) -> None:
    home = months["home"]
    lake = Lake(home)
    tables = ("products", "looks", "images", "generations", "dedup_decisions", "annotations")
    before = {t: lake.read(t).num_rows for t in tables}
    sums = {v: checksums(home, v) for v in VERSIONS}
    run = refresh(cli, home, MONTHS[-1])
    assert run.returncode == 0, run.stderr[-3000:]
    assert {t: lake.read(t).num_rows for t in tables} == before
    assert {v: checksums(home, v) for v in VERSIONS} == sums


def test_sigkill_during_month_two_then_rerun_gives_the_same_release(months: dict, cli: str) -> None:
    home = months["base"] / "before-month-2"
    script = months["base"] / "killer.py"
    script.write_text(KILLER)
    killed = refresh(cli, home, MONTHS[1], script=script, stage="dedup")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    rerun = refresh(cli, home, MONTHS[1])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert verify_release(Lake(home), VERSIONS[1]) == []
    assert checksums(home, VERSIONS[1]) == checksums(months["home"], VERSIONS[1])
