"""The lake, releases, queries and export on S3, through fsspec/s3fs against a local moto server.

Credentials and the endpoint come only from the environment (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`), exactly as the worker container gets them:
no test passes storage options to `Lake`.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import lakefill
import pytest

from lookbench_live.flows.export import ExportError, export_release
from lookbench_live.schema.records import DedupDecision, Rejection
from lookbench_live.warehouse import release as release_mod
from lookbench_live.warehouse.lake import Lake, LakeError
from lookbench_live.warehouse.query import QueryError, run_query
from lookbench_live.warehouse.release import (
    FILES,
    MANIFEST,
    ReleaseError,
    build_release,
    committed_versions,
    resolve_version,
    stage_release,
    verify_release,
)

s3fs = pytest.importorskip("s3fs", reason="the [s3] extra (s3fs) is not installed")
moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed")

VERSION = "v20261201"


class PlainTaxonomy:
    """Enough taxonomy for the builder (as in test_release.py)."""

    version = "test"

    def published_columns(self, category, attributes, main_attribute):
        return main_attribute, ", ".join(v for k, v in sorted(attributes.items()) if v != main_attribute)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on loopback, and the AWS_* environment pointing at it (only the environment)."""
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            env.delenv(name, raising=False)
        env.setenv("AWS_ACCESS_KEY_ID", "lookbench-test")
        env.setenv("AWS_SECRET_ACCESS_KEY", "lookbench-test-secret")
        env.setenv("AWS_ENDPOINT_URL", endpoint)
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        # No profile files of the machine may supply a credential or an endpoint.
        env.setenv("AWS_CONFIG_FILE", os.devnull)
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        # fsspec caches filesystem instances by their arguments, not the environment.
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            yield endpoint
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            server.stop()


def _raw_fs() -> s3fs.S3FileSystem:
    """An independent client (its own listing cache), as another process would have."""
    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket per test, created the way the compose bucket service creates it."""
    name = f"lb-{uuid.uuid4().hex[:12]}"
    _raw_fs().mkdir(name)
    return name


def _build(lake: Lake, version: str = VERSION, **kw):
    return build_release(lake, version=version, taxonomy=PlainTaxonomy(), **kw)


# ---------------------------------------------------------------------- images and tables
def test_images_and_tables_round_trip_on_s3(bucket: str) -> None:
    lake = Lake(f"s3://{bucket}/lake")
    assert lake.home == f"s3://{bucket}/lake" and not lake.local
    data = lakefill.draw(7)
    sha = lake.put_image(data)
    assert lake.put_image(data) == sha  # storing twice is a no-op
    assert lake.has_image(sha) and lake.get_image(sha) == data
    raw = _raw_fs()
    assert raw.cat_file(f"{bucket}/lake/images/{sha[:2]}/{sha[2:4]}/{sha}") == data  # really in the bucket
    with pytest.raises(LakeError, match="not in the lake"):
        lake.get_image("0" * 64)
    with pytest.raises(LakeError, match="not a sha256"):
        lake.get_image("../../etc/passwd")

    rows = [DedupDecision(sha256=f"{n:064x}", hash_method="m", decision="kept", run_id="r") for n in range(5)]
    assert lake.append(rows + rows[:2]) == 5  # repeats within a call are written once
    assert lake.append(rows) == 0  # a rerun adds nothing
    assert (
        lake.append([*rows[:3], DedupDecision(sha256="f" * 64, hash_method="m", decision="kept", run_id="r")])
        == 1
    )
    table = lake.read("dedup_decisions")
    assert table.num_rows == 6
    assert sorted(table.column("sha256").to_pylist()) == sorted([r.sha256 for r in rows] + ["f" * 64])
    assert len(lake.fragments("dedup_decisions")) == 2
    # A fresh Lake (a new process) reads the same content and keys.
    s3fs.S3FileSystem.clear_instance_cache()
    again = Lake(f"s3://{bucket}/lake")
    assert again.keys("dedup_decisions") == {(r.sha256,) for r in rows} | {("f" * 64,)}
    assert again.append(rows) == 0


WRITER = textwrap.dedent(
    """
    import sys
    from lookbench_live.schema.records import Rejection
    from lookbench_live.warehouse.lake import Lake
    lake = Lake(sys.argv[1])
    print(lake.append([Rejection(stage="s3test", item=f"other-{n}", reason="r", detail="", run_id="w")
                       for n in range(3)]))
    """
)


def test_a_reader_sees_what_another_process_appended(bucket: str, tmp_path: Path) -> None:
    """A long-lived reader (the worker, a query) must not serve a stale listing of the bucket."""
    home = f"s3://{bucket}/lake"
    reader = Lake(home)
    reader.append([Rejection(stage="s3test", item="mine", reason="r", detail="", run_id="w")])
    assert reader.read("rejections").num_rows == 1
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.run([sys.executable, str(script), home], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "3"
    assert reader.read("rejections").num_rows == 4
    assert reader.append([Rejection(stage="s3test", item="other-0", reason="r", detail="", run_id="w")]) == 0


def test_reconcile_removes_only_temp_debris_on_s3(bucket: str) -> None:
    lake = Lake(f"s3://{bucket}/lake")
    lake.append([Rejection(stage="s3test", item="a", reason="r", detail="", run_id="w")])
    sha = lake.put_image(lakefill.draw(3))
    raw = _raw_fs()
    debris = [f"{bucket}/lake/tables/rejections/.tmp-dead", f"{bucket}/lake/images/ab/cd/.tmp-dead"]
    for path in debris:
        raw.pipe_file(path, b"half a file")
    assert lake.read("rejections").num_rows == 1  # readers never list temp names
    removed = lake.reconcile()
    assert sorted(removed) == sorted(debris)
    assert not any(raw.exists(p) for p in debris)
    assert lake.has_image(sha) and lake.read("rejections").num_rows == 1
    assert lake.reconcile() == []


# ---------------------------------------------------------------------- releases and queries
@pytest.fixture(scope="module")
def s3_lake(s3_endpoint: str) -> Lake:
    """One filled S3 lake for the release tests (filling costs seconds); each test builds its own versions."""
    name = f"lb-{uuid.uuid4().hex[:12]}"
    _raw_fs().mkdir(name)
    lake = Lake(f"s3://{name}/lake")
    lakefill.fill(lake)
    return lake


def test_release_build_verify_and_query_on_s3(s3_lake: Lake, tmp_path: Path) -> None:
    result = _build(s3_lake)
    assert result.path == f"{s3_lake.home}/releases/{VERSION}"
    assert verify_release(s3_lake, "latest") == []
    assert resolve_version(s3_lake, "latest") == VERSION
    raw = _raw_fs()
    prefix = f"{s3_lake.root}/releases"
    assert not [p for p in raw.find(prefix) if "/." in p], "no staging or temp objects remain"
    assert json.loads(raw.cat_file(f"{prefix}/LATEST")) == {"version": VERSION}
    with pytest.raises(ReleaseError, match="already exists"):
        _build(s3_lake)
    # The same release built on a local disk has byte-identical data files.
    local = Lake(tmp_path / "local")
    lakefill.fill(local)
    reference = _build(local)
    for rel in FILES:
        assert result.manifest["files"][rel]["sha256"] == reference.manifest["files"][rel]["sha256"], rel

    # DuckDB over the S3 lake: tables and release views through pyarrow datasets, no httpfs.
    products = run_query(s3_lake, "SELECT count(DISTINCT product_id) AS n FROM products")
    assert products.column("n").to_pylist() == [12]
    counts = run_query(
        s3_lake,
        f"SELECT subset || '/' || split || '.parquet' AS rel, count(*) AS n FROM releases "
        f"WHERE version = '{VERSION}' GROUP BY ALL",
    ).to_pylist()
    assert {row["rel"]: row["n"] for row in counts} == {rel: n for rel, n in result.rows.items() if n}
    with pytest.raises(QueryError, match="read-only"):
        run_query(s3_lake, "DELETE FROM products")


def test_verify_on_s3_names_an_altered_file(s3_lake: Lake) -> None:
    version = "v20261120"
    _build(s3_lake, version=version, publish_latest=False)
    assert verify_release(s3_lake, version) == []
    raw = _raw_fs()
    path = f"{s3_lake.root}/releases/{version}/aigen_studio/gallery.parquet"
    data = bytearray(raw.cat_file(path))
    data[len(data) // 2] ^= 0x01
    raw.pipe_file(path, bytes(data))
    problems = verify_release(s3_lake, version)
    assert any("aigen_studio/gallery.parquet was altered" in p for p in problems), problems


def test_a_release_folder_without_manifest_is_not_a_release_on_s3(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Object stores have no rename: staging first, files at the version's path next, the
    manifest last; readers trust only manifests."""
    s3_lake = Lake(f"s3://{bucket}/lake")
    lakefill.fill(s3_lake, products=4, looks=1)
    committed, version = "v20261101", "v20261102"
    _build(s3_lake, version=committed)
    # New items for the next release (a release never repeats an earlier one's images).
    lakefill.fill(s3_lake, products=4, looks=1, seed=5, start=lakefill.T0.replace(day=2))

    # Staged, never committed: every data file, the card and the Croissant file are in the
    # staging prefix, nothing is at the version's path.
    staged = stage_release(s3_lake, version=version, taxonomy=PlainTaxonomy())
    raw = _raw_fs()
    assert "/.staging-" in staged.path and not raw.exists(f"{s3_lake.root}/releases/{version}")
    assert set(FILES) <= {p.split(staged.path + "/", 1)[1] for p in raw.find(staged.path)}

    # The publish dies after writing the files under the version's path, before the manifest.
    def die(step: str) -> None:
        if step == "before_manifest":
            raise KeyboardInterrupt("killed before the manifest")

    monkeypatch.setattr(release_mod.commit, "_fault_point", die)
    with pytest.raises(KeyboardInterrupt):
        _build(s3_lake, version=version)
    monkeypatch.undo()
    written = {p.split(f"/{version}/", 1)[1] for p in raw.find(f"{s3_lake.root}/releases/{version}")}
    assert set(FILES) <= written and MANIFEST not in written  # the debris a killed build leaves
    assert version not in committed_versions(s3_lake) and committed in committed_versions(s3_lake)
    with pytest.raises(ReleaseError, match=r"no manifest\.json"):
        resolve_version(s3_lake, version)
    assert resolve_version(s3_lake, "latest") == committed  # the pointer did not move
    assert verify_release(s3_lake, version) == ["manifest.json is missing"]
    views = run_query(s3_lake, "SELECT DISTINCT version FROM releases").column("version").to_pylist()
    assert committed in views and version not in views
    # The rerun needs no --replace (nothing was committed) and leaves a sound release.
    _build(s3_lake, version=version)
    assert verify_release(s3_lake, version) == []
    assert resolve_version(s3_lake, "latest") == version
    assert not [p for p in raw.find(f"{s3_lake.root}/releases") if "/." in p], "no staging debris remains"


# ---------------------------------------------------------------------- export
def test_export_local_release_to_s3_and_back(tmp_path: Path, bucket: str) -> None:
    local = Lake(tmp_path / "lake")
    lakefill.fill(local)
    built = _build(local)
    destination = f"s3://{bucket}/exports/releases"
    first = export_release(local, "latest", destination)
    assert (first.version, first.already_there) == (VERSION, False)
    assert first.destination == f"{destination}/{VERSION}"
    raw = _raw_fs()
    on_s3 = {p.split(f"/{VERSION}/", 1)[1] for p in raw.find(f"{bucket}/exports/releases/{VERSION}")}
    assert on_s3 == set(built.manifest["files"]) | {MANIFEST}
    assert export_release(local, VERSION, destination).already_there is True

    # The exported folder is a release of the lake rooted above it; it exports back, identical.
    remote = Lake(f"s3://{bucket}/exports")
    assert committed_versions(remote) == [VERSION] and verify_release(remote, VERSION) == []
    back = tmp_path / "back"
    export_release(remote, VERSION, str(back))
    for rel, entry in built.manifest["files"].items():
        assert (back / VERSION / rel).read_bytes() == Path(
            local.path("releases", VERSION, rel)
        ).read_bytes(), rel
        assert entry["size"] == (back / VERSION / rel).stat().st_size

    # An archive on S3 holds the same snapshot.
    archive = f"s3://{bucket}/archives/{VERSION}.tar"
    export_release(local, VERSION, archive)
    with tarfile.open(fileobj=io.BytesIO(raw.cat_file(archive.removeprefix("s3://")))) as tar:
        assert {m.name for m in tar.getmembers()} == {f"{VERSION}/{rel}" for rel in on_s3}

    # A different snapshot of the same version (another lake's: a published one never changes)
    # is never overwritten.
    other = Lake(tmp_path / "other")
    lakefill.fill(other, products=4, looks=1)
    _build(other)
    with pytest.raises(ExportError, match="different snapshot"):
        export_release(other, VERSION, destination)
    with pytest.raises(ExportError, match="different snapshot"):
        export_release(other, VERSION, archive)
    assert (
        raw.cat_file(f"{bucket}/exports/releases/{VERSION}/{MANIFEST}")
        == json.dumps(built.manifest, indent=2, sort_keys=True).encode()
    )


def test_export_refuses_a_destination_holding_files_without_manifest(tmp_path: Path, bucket: str) -> None:
    local = Lake(tmp_path / "lake")
    lakefill.fill(local, products=4, looks=1)
    _build(local)
    _raw_fs().pipe_file(f"{bucket}/exports/{VERSION}/real_studio_flat/query.parquet", b"PAR1 not ours")
    with pytest.raises(ExportError, match="without a manifest"):
        export_release(local, VERSION, f"s3://{bucket}/exports")
    # Nothing of ours was written beside the foreign file.
    assert _raw_fs().find(f"{bucket}/exports/{VERSION}") == [
        f"{bucket}/exports/{VERSION}/real_studio_flat/query.parquet"
    ]


def test_writer_lock_on_s3_is_exclusive_and_released(bucket: str) -> None:
    lake = Lake(f"s3://{bucket}/lake")
    with (
        lake.writer_lock("flow"),
        pytest.raises(LakeError, match="holds the writer lock"),
        Lake(f"s3://{bucket}/lake").writer_lock("flow"),
    ):
        pass
    with lake.writer_lock("flow"):  # released: a second holder gets it
        pass


def test_a_killed_holders_s3_lock_is_taken_over_after_its_lease(bucket: str) -> None:
    """A holder killed with SIGKILL leaves its lock object; its lease runs out; the next writer
    takes it over (conditional PUT on the expired ETag) and records the takeover."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    home = f"s3://{bucket}/lease-lake"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from lookbench_live.warehouse.lake import Lake\n"
         f"with Lake({home!r}).writer_lock('refresh-flow', lease_s=3):\n"
         "    print('held', flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ),
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        # Alive and renewing: refused, naming the holder, even after several leases.
        time.sleep(4)
        with (
            pytest.raises(LakeError, match=r"refresh-flow \(pid \d+"),
            Lake(home).writer_lock("release build"),
        ):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock = _raw_fs().cat_file(f"{bucket}/lease-lake/locks/writer.lock")
    assert json.loads(lock)["pid"] == holder.pid  # the killed holder's lock is still there
    time.sleep(3.5)  # its lease runs out
    with Lake(home).writer_lock("release build"):
        pass
    rows = Lake(home).read("rejections").to_pylist()
    assert [r["reason"] for r in rows] == ["lock_taken_over"]
    assert "refresh-flow" in rows[0]["detail"] and str(holder.pid) in rows[0]["detail"]
    assert not _raw_fs().exists(f"{bucket}/lease-lake/locks/writer.lock")  # released after use


# ---------------------------------------------------------------------- commit protocol (12 §2)
# A release the content check held back: committed, not published (so `LATEST` does not name
# it), and the only kind that may be rebuilt in place with `--replace`.
HELD = {"gate": {"passed": False, "reason": "content check: test"}}


def _two_releases(bucket: str, *, held: bool = False) -> tuple[Lake, str]:
    """A lake whose `latest` is a committed release (or, `held`, whose one committed release was
    held back), with new items for a second one."""
    lake = Lake(f"s3://{bucket}/lake")
    lakefill.fill(lake, products=4, looks=1)
    _build(lake, version="v20261101", **({"extra_manifest": HELD} if held else {}))
    lakefill.fill(lake, products=4, looks=1, seed=5, start=lakefill.T0.replace(day=2))
    return lake, "v20261101"


def _store_flips_a_byte_of(lake: Lake, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store keeps one byte of every object whose key ends with `suffix` altered: whatever
    the writer hands it, by a streamed upload (`open(..., "wb")`) or one PUT (`pipe_file`).
    So the bytes stored differ from the bytes the release writer produced and checksummed."""
    fs = lake.fs
    real_open, real_pipe = fs.open, fs.pipe_file
    flip_at = 100  # past the "PAR1" magic, inside the first data page

    def flipped(data: bytes, start: int) -> bytes:
        if start <= flip_at < start + len(data):
            data = bytearray(data)
            data[flip_at - start] ^= 0x01
        return bytes(data)

    def open_(path: str, mode: str = "rb", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if "w" in mode and str(path).endswith(suffix):
            real_write, written = handle.write, [0]

            def write(data) -> int:
                data = bytes(data)
                real_write(flipped(data, written[0]))
                written[0] += len(data)
                return len(data)

            handle.write = write
        return handle

    def pipe_file(path: str, value: bytes, *args, **kwargs):
        if str(path).endswith(suffix):
            value = flipped(bytes(value), 0)
        return real_pipe(path, value, *args, **kwargs)

    monkeypatch.setattr(fs, "open", open_)
    monkeypatch.setattr(fs, "pipe_file", pipe_file)


def test_a_file_corrupted_before_commit_leaves_the_version_uncommitted_on_s3(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, committed = _two_releases(bucket, held=True)
    version = "v20261102"
    _store_flips_a_byte_of(lake, "aigen_studio/gallery.parquet", monkeypatch)
    with pytest.raises(
        ReleaseError, match=r"failed verification before commit: aigen_studio/gallery\.parquet"
    ):
        _build(lake, version=version)
    raw = _raw_fs()
    old_manifest = raw.cat_file(f"{lake.root}/releases/{committed}/{MANIFEST}")
    # A corrupted --replace never touches the live release: it stays readable and verifying.
    with pytest.raises(ReleaseError, match="failed verification before commit"):
        _build(lake, version=committed, replace=True)
    monkeypatch.undo()
    assert raw.cat_file(f"{lake.root}/releases/{committed}/{MANIFEST}") == old_manifest
    assert verify_release(lake, committed) == []
    assert not raw.exists(f"{lake.root}/releases/{version}")  # nothing at the version's path
    assert committed_versions(lake) == [committed]
    assert release_mod.read_latest(lake) is None  # the failed build published nothing
    # The rerun is a build, not "already exists": the failed attempt committed nothing.
    _build(lake, version=version)
    assert verify_release(lake, version) == [] and resolve_version(lake, "latest") == version


KILLED_REPLACE = textwrap.dedent(
    """
    import os, signal, sys
    from lookbench_live.warehouse import release
    from lookbench_live.warehouse.lake import Lake

    class PlainTaxonomy:
        version = "test"
        def published_columns(self, category, attributes, main_attribute):
            return main_attribute, ", ".join(v for k, v in sorted(attributes.items()) if v != main_attribute)

    def die(step):
        if step == sys.argv[3]:  # e.g. before_manifest: every new file written, the manifest not swapped
            os.kill(os.getpid(), signal.SIGKILL)

    release.commit._fault_point = die
    release.build_release(Lake(sys.argv[1]), version=sys.argv[2], taxonomy=PlainTaxonomy(), replace=True)
    """
)


@pytest.mark.parametrize("kill_at", ["replace_redirected", "before_manifest"])
def test_a_kill_during_replace_leaves_the_old_release_on_s3(
    bucket: str, tmp_path: Path, kill_at: str
) -> None:
    """A `--replace` killed after the old release was copied aside (before or after the new files
    overwrote it in place) leaves the old release committed and readable, whole, to every reader
    until the next writer puts it back at its own path; an unkilled replace then commits."""
    import hashlib

    lake, version = _two_releases(bucket, held=True)
    raw = _raw_fs()
    base = f"{lake.root}/releases/{version}"
    old_manifest = raw.cat_file(f"{base}/{MANIFEST}")
    old_files = json.loads(old_manifest)["files"]
    old_rows = run_query(lake, f"SELECT count(*) AS n FROM releases WHERE version = '{version}'").to_pylist()
    script = tmp_path / "replace.py"
    script.write_text(KILLED_REPLACE)
    proc = subprocess.run(
        [sys.executable, str(script), lake.home, version, kill_at],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    changed = [
        rel
        for rel, entry in old_files.items()
        if raw.exists(f"{base}/{rel}")
        and hashlib.sha256(raw.cat_file(f"{base}/{rel}")).hexdigest() != entry["sha256"]
    ]
    if kill_at == "before_manifest":
        assert changed, "the kill came after the new files were written"
    # Every reader still gets the old release, whole: committed, resolvable, verified, queried.
    reader = Lake(lake.home)
    assert version in committed_versions(reader)
    assert resolve_version(reader, version) == version
    assert release_mod.read_manifest(reader, version)["files"] == old_files
    assert verify_release(reader, version) == []
    rows = run_query(reader, f"SELECT count(*) AS n FROM releases WHERE version = '{version}'").to_pylist()
    assert rows == old_rows
    # The next writer (any build, or reconcile alone) puts the old release back at its own path.
    from lookbench_live.warehouse.release import reconcile_releases

    actions = reconcile_releases(Lake(lake.home))
    assert f"restored {version}" in actions
    assert raw.cat_file(f"{base}/{MANIFEST}") == old_manifest
    for rel, entry in old_files.items():
        assert hashlib.sha256(raw.cat_file(f"{base}/{rel}")).hexdigest() == entry["sha256"], rel
    assert verify_release(lake, version) == [] and release_mod.read_latest(lake) is None
    assert not [p for p in raw.find(f"{lake.root}/releases") if "/." in p], "no staging or copy remains"
    # And a replace that is not killed commits the new build, leaving no copy behind.
    _build(lake, version=version, replace=True)
    assert verify_release(lake, version) == [] and raw.cat_file(f"{base}/{MANIFEST}") != old_manifest
    assert release_mod.LOCATION_KEY not in json.loads(raw.cat_file(f"{base}/{MANIFEST}"))
    assert not [p for p in raw.find(f"{lake.root}/releases") if "/." in p]


def test_two_concurrent_commits_of_one_version_exactly_one_wins_on_s3(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses
    import threading

    from lookbench_live.warehouse.release import ReleaseExists, commit_release

    lake, _ = _two_releases(bucket)
    version = "v20261102"
    first = stage_release(lake, version=version, taxonomy=PlainTaxonomy())
    # A second writer with its own staging prefix (the same bytes: builds are reproducible).
    other = first.path.replace(f".staging-{version}-", f".staging-{version}-other")
    raw = _raw_fs()
    for path in raw.find(first.path):
        raw.copy(path, path.replace(first.path, other))
    second = dataclasses.replace(first, path=other, files=dict(first.files))
    # Both have checked "not committed yet" and written every file before either puts its manifest.
    barrier = threading.Barrier(2, timeout=120)
    monkeypatch.setattr(
        release_mod.commit, "_fault_point", lambda step: barrier.wait() if step == "before_manifest" else None
    )
    outcomes: list[object] = []

    def commit(staged) -> None:
        try:
            outcomes.append(commit_release(Lake(lake.home), staged))
        except Exception as exc:  # the loser's error is the outcome under test
            outcomes.append(exc)

    threads = [threading.Thread(target=commit, args=(s,)) for s in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    winners = [o for o in outcomes if not isinstance(o, Exception)]
    losers = [o for o in outcomes if isinstance(o, Exception)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert isinstance(losers[0], ReleaseExists) and losers[0].version == version
    on_s3 = json.loads(raw.cat_file(f"{lake.root}/releases/{version}/{MANIFEST}"))
    assert on_s3["created_at"] == winners[0].manifest["created_at"]  # the winner's manifest, not the loser's
    assert verify_release(lake, version) == [] and resolve_version(lake, "latest") == version
    assert not [p for p in raw.find(f"{lake.root}/releases") if "/." in p]


def test_publishing_a_release_file_streams_it_in_parts_and_is_conditional_on_s3(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A noise gallery may be gigabytes: commit copies each staged file to its published path in
    parts (never whole in memory), as one object that appears whole or not at all, and only
    where no object is (If-None-Match on the multipart completion)."""
    lake = Lake(f"s3://{bucket}/lake")
    raw = _raw_fs()
    monkeypatch.setattr(release_mod.commit, "PUBLISH_CHUNK", 5 << 20)  # S3's smallest multipart part
    source, target = f"{bucket}/lake/staging/noise.parquet", f"{bucket}/lake/releases/v1/noise.parquet"
    raw.pipe_file(source, os.urandom(30 << 20))
    # Never the whole file at once: no whole-object read, no read or write above one part.
    largest = [0]
    real_open = lake.fs.open

    def open_(path, mode="rb", **kw):
        handle = real_open(path, mode, **kw)
        for name in ("read", "write"):
            method = getattr(handle, name)

            def sized(data=-1, _method=method, _name=name):
                out = _method(data)
                size = len(out) if _name == "read" else len(data)
                largest[0] = max(largest[0], size)
                return out

            setattr(handle, name, sized)
        return handle

    def whole(*args, **kw):
        raise AssertionError("a release file was read whole")

    monkeypatch.setattr(lake.fs, "open", open_)
    monkeypatch.setattr(lake.fs, "cat_file", whole)
    assert release_mod.commit._publish_file(lake, source, target, exclusive=True)
    monkeypatch.undo()
    monkeypatch.setattr(release_mod.commit, "PUBLISH_CHUNK", 5 << 20)
    assert 0 < largest[0] <= 5 << 20
    assert raw.cat_file(target) == raw.cat_file(source)
    assert "-" in raw.info(target)["ETag"]  # a multipart upload's ETag: "<md5>-<parts>"
    # The key exists: the conditional completion refuses, and the object is unchanged.
    raw.pipe_file(f"{bucket}/lake/staging/other.parquet", os.urandom(11 << 20))
    assert not release_mod.commit._publish_file(
        lake, f"{bucket}/lake/staging/other.parquet", target, exclusive=True
    )
    assert raw.cat_file(target) == raw.cat_file(source)

    # A copy that fails halfway publishes nothing, not even a part.
    class Torn(io.RawIOBase):
        def __init__(self) -> None:
            self.left = 3

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            if not self.left:
                raise OSError("the staging store went away")
            self.left -= 1
            buffer[: len(buffer)] = b"x" * len(buffer)
            return len(buffer)

    real_open = lake.fs.open
    monkeypatch.setattr(
        lake.fs, "open", lambda path, mode="rb", **kw: Torn() if mode == "rb" else real_open(path, mode, **kw)
    )
    torn = f"{bucket}/lake/releases/v1/torn.parquet"
    with pytest.raises(OSError, match="went away"):
        release_mod.commit._publish_file(lake, source, torn, exclusive=True)
    monkeypatch.undo()
    import gc

    gc.collect()
    assert not _raw_fs().exists(torn)
