"""The flows users run: the main job end to end, kill -9 in every stage, backfill, export, schedule.

One module-scoped reference run of `lookbench-live refresh` (the README's main job) on the
embedded default; the other tests compare against it. Every run uses the same sample-store
port and logical date, because product URLs (and so release rows) contain them. (The sharded Dask
refresh compares two runs of its own: `test_flows_dask.py`.)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from flow_fixtures import AS_OF, VERSION, parquet_checksums
from flow_fixtures import refresh as run_refresh

from lookbench_live.warehouse.lake import Lake
from lookbench_live.warehouse.release import FILES, read_manifest, resolve_version, verify_release

PORT = 48791
TABLE_KEYS_CHECKED = (
    "products",
    "looks",
    "images",
    "generations",
    "dedup_decisions",
    "annotations",
    "completions",
)

pytestmark = pytest.mark.slow


def refresh(cli: str, home: Path, *extra: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """`flow_fixtures.refresh` on this module's sample-store port unless `port=` is given."""
    return run_refresh(cli, home, *extra, **{"port": PORT, **options})


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, cli: str) -> Path:
    home = tmp_path_factory.mktemp("reference") / "lake"
    run = refresh(cli, home)
    assert run.returncode == 0, run.stderr[-4000:]
    (home.parent / "stdout.txt").write_text(run.stdout)
    return home


def test_main_job_builds_a_verified_release_with_report_and_evaluation(reference: Path) -> None:
    lake = Lake(reference)
    assert verify_release(lake, "latest") == []
    manifest = read_manifest(lake, VERSION)
    for rel in FILES:
        assert manifest["files"][rel]["rows"] > 0, f"{rel} is empty"
    assert "report.html" in manifest["files"]
    assert manifest["evaluation"][0]["model"].startswith("baseline")
    assert manifest["annotation_mode"] == "metadata_prior"
    assert manifest["generation_tiny_local"] is True
    evidence = manifest["evidence_checks"]  # prior mode: the VLM check says it did not run
    assert evidence["generated_category"]["ran"] is False and evidence["conditioned_look"]["methods"]
    assert evidence["photo_type"]["scored"] >= manifest["files"]["real_studio_flat/query.parquet"]["rows"]
    out = (reference.parent / "stdout.txt").read_text()
    assert f"releases/{VERSION}" in out and "report.html" in out
    # Each dedup and annotate pass has its own line and counts (issue 26 §1): never their sum.
    for step in ("dedup real", "dedup aigen"):
        assert re.search(rf"^\| {step} \| [\d.]+ \| radius 4, ", out, re.M), out
    assert re.search(r"^\| annotate real \| .*\n(?:.*\n)*\| annotate aigen \| ", out, re.M), out
    # every query has 1–4 gallery rows of its item
    base = reference / "releases" / VERSION
    for subset in ("real_studio_flat", "aigen_studio", "real_streetlook", "aigen_streetlook"):
        gallery = pq.read_table(base / subset / "gallery.parquet", columns=["item_ID"]).column(0).to_pylist()
        for item in pq.read_table(base / subset / "query.parquet", columns=["item_ID"]).column(0).to_pylist():
            assert 1 <= gallery.count(item) <= 4
    # AIGen queries of real products were drawn from those products' photos (the IP-Adapter), and
    # their gallery is the products' real photos.
    for subset in ("aigen_studio", "aigen_streetlook"):
        queries = pq.read_table(
            base / subset / "query.parquet", columns=["item_ID", "provenance"]
        ).to_pylist()
        gallery = pq.read_table(base / subset / "gallery.parquet", columns=["item_ID", "source"]).to_pylist()
        real = [q for q in queries if not q["item_ID"].startswith("aigen:")]
        if not real:
            # The tiny random pipeline depicts nothing: its conditioned looks (a studio image, a
            # street scene's garment box) fail the conditioned-look check and are held back with
            # the reason (docs/release.md, "Label rules").
            lake = Lake(reference)
            failed = {
                (r["bbox"] != "") for r in lake.read("evidence_checks").to_pylist()
                if r["check"] == "conditioned_look" and r["status"] == "fail"
            }  # fmt: skip
            assert failed == {True, False}, f"{subset} has no query of a real product and no failed look"
            reasons = {r["reason"] for r in lake.read("rejections").to_pylist()}
            assert "conditioned_look_mismatch" in reasons
        for query in real:
            provenance = json.loads(query["provenance"])
            assert query["item_ID"] in {c["product_key"] for c in provenance["conditioning"]}
            assert (
                provenance["ip_adapter"].startswith("tiny-ip-adapter-") and provenance["ip_adapter_scale"] > 0
            )
            sources = {g["source"] for g in gallery if g["item_ID"] == query["item_ID"]}
            assert sources and "generation" not in sources


def test_a_rerun_of_a_finished_refresh_changes_nothing(reference: Path, cli: str) -> None:
    before = {t: Lake(reference).read(t).num_rows for t in TABLE_KEYS_CHECKED}
    checksums = parquet_checksums(reference)
    run = refresh(cli, reference)
    assert run.returncode == 0, run.stderr[-3000:]
    after = {t: Lake(reference).read(t).num_rows for t in TABLE_KEYS_CHECKED}
    assert before == after
    assert parquet_checksums(reference) == checksums


KILLER = textwrap.dedent(
    """
    import os, signal, sys, threading, time


    def install(stage):

        def die():
            # The whole process group, as a container stop or OOM kill would: Prefect's embedded API
            # server is a child process of the flow and would otherwise outlive it.
            os.killpg(0, signal.SIGKILL)

        from lookbench_live.warehouse import lake as lake_mod
        real_append = lake_mod.Lake.append
        counts = {}
        # stage -> (table whose n-th append kills the run, n)
        AT = {"ingest": ("images", 1), "dedup": ("dedup_decisions", 1), "annotate": ("annotations", 1),
              "generate": ("generations", 1)}

        def append(self, records):
            records = list(records)
            if records and stage in AT:
                table, n = AT[stage]
                if type(records[0]).__table__ == table:
                    counts[table] = counts.get(table, 0) + 1
                    if counts[table] == n:
                        real_append(self, records[: len(records) // 2])  # half a batch is in, then death
                        die()
            return real_append(self, records)

        lake_mod.Lake.append = append

        if stage == "crawl":
            import lookbench_live.scrapers.crawl as crawl_mod
            real_crawl = crawl_mod.run_crawl
            calls = []
            def run_crawl(*a, **k):
                calls.append(1)
                if len(calls) == 2:  # the second site: die while its crawl subprocess runs
                    threading.Timer(1.5, die).start()
                return real_crawl(*a, **k)
            crawl_mod.run_crawl = run_crawl
        if stage == "release":
            # Release files are streamed (write_rows), not written whole: die halfway through the
            # fifth file's rows, with its temp file open in the staging folder.
            from lookbench_live.warehouse.release import rows as release_mod
            real_rows = release_mod.write_rows
            files = []
            def write_rows(handle, rows, load_image):
                files.append(1)
                if len(files) == 5:
                    real_rows(handle, rows[: len(rows) // 2], load_image)
                    handle.flush()
                    die()
                return real_rows(handle, rows, load_image)
            release_mod.write_rows = write_rows
        if stage == "evaluate":
            # Inside the evaluation itself: the baseline's embedding cache is written (the rerun
            # scores from it without embedding again), then death before any score is recorded.
            import lookbench_live.evaluation.evaluate as evaluate_mod
            real_save = evaluate_mod.save_cache
            def save_cache(*a, **k):
                real_save(*a, **k)
                die()
            evaluate_mod.save_cache = save_cache


    if __name__ == "__main__":  # decode worker processes re-import this file: only the parent patches
        stage = sys.argv[1]
        sys.argv = ["lookbench-live", *sys.argv[2:]]
        install(stage)
        from lookbench_live.cli import main

        main()
    """
)


def test_sigkill_in_every_stage_then_rerun_gives_the_same_release(
    reference: Path, tmp_path: Path, cli: str
) -> None:
    home = tmp_path / "lake"
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    args = ["refresh", "--home", str(home), "--as-of", AS_OF, "--port", str(PORT)]
    for stage in ("crawl", "ingest", "dedup", "annotate", "generate", "release", "evaluate"):
        run = subprocess.run(
            [sys.executable, str(script), stage, *args],
            capture_output=True,
            text=True,
            timeout=900,
            start_new_session=True,
        )
        assert run.returncode == -signal.SIGKILL, (
            f"{stage}: not killed ({run.returncode}): {run.stderr[-3000:]}"
        )
        # Killed before the commit: otherwise the later stages' runs find the release made and
        # their kill points are never reached.
        assert not (home / "releases" / VERSION / "manifest.json").exists(), f"{stage}: committed"
    # O6: every step before the release finished in one of the killed runs (the last was killed
    # in `evaluate`); completion is the lake's ledger, not Prefect's cache. The rerun skips them:
    # it writes no fragment into their tables and no new completion marker for them.
    finished = ("products", "looks", "images", "dedup_decisions", "annotations", "generations")
    before = {t: Lake(home).fragments(t) for t in finished}
    markers = {(r["stage"], r["shard"]) for r in Lake(home).read("completions").to_pylist()}
    assert {"crawl", "generate"} <= {stage for stage, _ in markers}, markers
    final = refresh(cli, home)
    assert final.returncode == 0, final.stderr[-4000:]
    assert {t: Lake(home).fragments(t) for t in finished} == before
    after = {(r["stage"], r["shard"]) for r in Lake(home).read("completions").to_pylist()}
    assert {stage for stage, _ in after - markers} <= {"release"}, after - markers
    assert verify_release(Lake(home), VERSION) == []
    assert parquet_checksums(home) == parquet_checksums(reference)
    lake = Lake(home)
    for table in TABLE_KEYS_CHECKED:
        keys = lake.read(table, columns=list(lake_key(table))).to_pylist()
        assert len(keys) == len({tuple(r.values()) for r in keys}), f"duplicate keys in {table}"
        if table not in ("completions",):
            assert lake.read(table).num_rows == Lake(reference).read(table).num_rows, table


SIGNALLER = textwrap.dedent(
    """
    import os, signal, sys, threading


    def install(stage, sig):

        def send():
            # To the whole process group, as a terminal's Ctrl-C or a scheduler stopping its unit
            # does: Prefect's local API must outlive it (it runs in a session of its own).
            os.killpg(0, sig)

        if stage == "crawl":  # while the first site's crawl subprocess runs
            import lookbench_live.scrapers.crawl as crawl_mod
            real_crawl = crawl_mod.run_crawl
            calls = []
            def run_crawl(*a, **k):
                calls.append(1)
                if len(calls) == 1:
                    threading.Timer(1.5, send).start()
                return real_crawl(*a, **k)
            crawl_mod.run_crawl = run_crawl
        if stage in ("ingest", "generate"):  # once the stage's first records are in the lake
            from lookbench_live.warehouse import lake as lake_mod
            real_append = lake_mod.Lake.append
            table = {"ingest": "images", "generate": "generations"}[stage]
            sent = []
            def append(self, records):
                records = list(records)
                out = real_append(self, records)
                if records and type(records[0]).__table__ == table and not sent:
                    sent.append(1)
                    send()
                return out
            lake_mod.Lake.append = append
        if stage == "commit":  # the commit step has begun, the release's commit has not
            import dataclasses
            import lookbench_live.flows.refresh as refresh_mod
            for i, step in enumerate(refresh_mod.PIPELINE):
                if step.name == "commit":
                    def commit(run, fn=step.fn):
                        send()
                        return fn(run)
                    refresh_mod.PIPELINE = (
                        *refresh_mod.PIPELINE[:i],
                        dataclasses.replace(step, fn=commit),
                        *refresh_mod.PIPELINE[i + 1 :],
                    )


    if __name__ == "__main__":
        stage, name = sys.argv[1], sys.argv[2]
        sys.argv = ["lookbench-live", *sys.argv[3:]]
        # The settings the command makes before it imports Prefect, made before the patches do.
        from lookbench_live.flows.runtime import offline_defaults
        from lookbench_live.terminal import configure_terminal
        offline_defaults()
        configure_terminal()
        install(stage, getattr(signal, name))
        from lookbench_live.cli import main

        main()
    """
)


def test_sigint_and_sigterm_stop_at_a_safe_point_and_the_rerun_publishes_the_same_release(
    reference: Path, tmp_path: Path, cli: str
) -> None:
    """Ctrl-C (SIGINT) or SIGTERM in crawl, ingest, generate and just before the commit: exit
    130/143 with one line naming the signal and the step, the lock released by the process (not
    freed by its death), nothing committed; one rerun publishes the reference's release. (Dedup
    and annotate share these safe points: between steps and between batches.)"""
    home = tmp_path / "lake"
    script = tmp_path / "signaller.py"
    script.write_text(SIGNALLER)
    args = ["refresh", "--home", str(home), "--as-of", AS_OF, "--port", str(PORT)]
    # A Prefect home of these runs alone: its database is what a Prefect server would show.
    prefect_home = tmp_path / "prefect"
    prefect_home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(prefect_home)}
    stops = (
        ("crawl", signal.SIGINT),
        ("ingest", signal.SIGTERM),
        ("generate", signal.SIGTERM),
        ("commit", signal.SIGINT),
    )
    for stage, sig in stops:
        run = subprocess.run(
            [sys.executable, str(script), stage, sig.name, *args],
            capture_output=True,
            text=True,
            timeout=900,
            start_new_session=True,
            env=env,
        )
        assert run.returncode == 128 + sig, f"{stage}: {run.returncode}: {run.stderr[-3000:]}"
        last = run.stderr.strip().splitlines()[-1]
        assert last.startswith(f"interrupted by {sig.name} during {stage}: "), run.stderr[-3000:]
        assert "Traceback" not in run.stderr and "ERROR" not in run.stderr, run.stderr[-3000:]
        # Released by the process on its way out: an empty holder record (a killed holder's stays).
        assert (home / "locks" / "writer.lock").read_text(encoding="utf-8") == "", stage
        assert not (home / "releases" / VERSION / "manifest.json").exists(), f"{stage}: committed"
        assert not (home / "releases" / "LATEST").exists(), f"{stage}: published"
    reasons = {r["reason"] for r in Lake(home).read("rejections", columns=["reason"]).to_pylist()}
    assert "lock_taken_over" not in reasons
    final = refresh(cli, home, env={"PREFECT_HOME": str(prefect_home)})
    assert final.returncode == 0, final.stderr[-4000:]
    assert parquet_checksums(home) == parquet_checksums(reference)
    runs_as_prefect_shows_them(prefect_home / "prefect.db")
    # The manifests are equal but for when they were written (created_at, and the report that
    # says when it was written).
    ours, theirs = (read_manifest(Lake(h), VERSION) for h in (home, reference))
    for manifest in (ours, theirs):
        manifest.pop("created_at")
        manifest["files"].pop("report.html")
    assert ours == theirs


def runs_as_prefect_shows_them(database: Path) -> None:
    """The five runs in Prefect's database: named after the release, tagged, the interrupted ones
    Cancelled naming the signal; the last one's tasks named by site and pass, its steps' INFO
    lines with counts, and its summary artifact linking the release, report and card."""
    import sqlite3

    with sqlite3.connect(database) as db:
        runs = db.execute("SELECT id, name, state_type, tags FROM flow_run ORDER BY created").fetchall()
        assert [r[1] for r in runs] == [f"refresh-{VERSION}"] * 5, runs
        assert [r[2] for r in runs] == ["CANCELLED"] * 4 + ["COMPLETED"], runs
        assert all({"lookbench-live", "refresh"} <= set(json.loads(r[3])) for r in runs), runs
        last = runs[-1][0]
        tasks = {r[0] for r in db.execute("SELECT name FROM task_run WHERE flow_run_id = ?", (last,))}
        assert any(name.startswith("crawl-sample") for name in tasks), tasks
        assert {"dedup-real", "annotate-real", "generate", "dedup-aigen", "annotate-aigen"} <= tasks, tasks
        # Every release step is a task of its own, so the end of a run is not blank in the timeline.
        assert {"evidence", "stage", "check", "labels", "evaluate", "report", "commit"} <= tasks, tasks
        lines = [
            r[0] for r in db.execute("SELECT message FROM log WHERE flow_run_id = ? AND level = 20", (last,))
        ]
        for step in ("crawl", "generate", "commit"):
            assert any(f" {step}: " in line for line in lines), (step, lines)
        (data,) = db.execute(
            "SELECT data FROM artifact WHERE key = 'refresh-summary' AND flow_run_id = ?", (last,)
        ).fetchone()
        for link in ("[release](file://", "[report](file://", "[card](file://"):
            assert link in data, data


def lake_key(table: str) -> tuple[str, ...]:
    from lookbench_live.schema.records import TABLES

    return TABLES[table].__key__


def test_backfill_builds_its_window_and_leaves_other_releases_untouched(reference: Path, cli: str) -> None:
    base = reference / "releases" / VERSION
    before = {p: p.read_bytes() for p in base.rglob("*") if p.is_file()}
    # The reference release's own window (its first: one cadence before its as-of day, to the end
    # of that day), so the backfill holds the same items under the freshness rules.
    span = read_manifest(Lake(reference), VERSION)["window"]
    start, end = (dt.datetime.fromisoformat(span[k]).date().isoformat() for k in ("start", "end"))
    window = ["--start", start, "--end", end, "--version", "v20261130"]
    run = subprocess.run(
        [cli, "backfill", "--home", str(reference), *window, "--stages", "release", "--stages", "evaluate"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lake = Lake(reference)
    assert verify_release(lake, "v20261130") == []
    # nothing was released before v20261130, so it holds that window's items, as v20261201 does
    assert parquet_checksums(reference, "v20261130") == parquet_checksums(reference)
    assert resolve_version(lake, "latest") == VERSION  # an older window never takes `latest`
    again = subprocess.run(
        [cli, "backfill", "--home", str(reference), *window, "--stages", "release", "--replace"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    # Published means immutable: a rebuild in place of the published v20261130 is refused.
    assert again.returncode != 0 and "is published and its bytes never change" in again.stderr, again.stderr[
        -3000:
    ]
    assert verify_release(lake, "v20261130") == []
    assert {p: p.read_bytes() for p in base.rglob("*") if p.is_file()} == before


def test_export_to_a_folder_and_a_tar_verifies_at_the_destination(
    reference: Path, tmp_path: Path, cli: str
) -> None:
    for dest in (tmp_path / "share", tmp_path / "snap.tar"):
        run = subprocess.run(
            [cli, "export", VERSION, "--to", str(dest), "--home", str(reference)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        assert "copied and verified" in run.stdout
        again = subprocess.run(
            [cli, "export", VERSION, "--to", str(dest), "--home", str(reference)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "already there" in again.stdout
    exported = tmp_path / "share" / VERSION
    assert (
        json.loads((exported / "manifest.json").read_text())["files"].keys()
        == read_manifest(Lake(reference), VERSION)["files"].keys()
    )
    with tarfile.open(tmp_path / "snap.tar") as tar:
        assert f"{VERSION}/report.html" in tar.getnames()
    # a different snapshot at the destination is never overwritten
    manifest = exported / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"code_version"', '"code_version_x"'))
    refused = subprocess.run(
        [cli, "export", VERSION, "--to", str(tmp_path / "share"), "--home", str(reference)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode != 0 and "different snapshot" in refused.stderr


def test_secrets_used_by_a_run_appear_in_no_output(tmp_path: Path, cli: str) -> None:
    """O9, X3: a run whose VLM and judge really use their keys (the loopback servers demand them),
    at DEBUG, leaves no key in its output, lake, release, Prefect database (artifacts, parameters,
    logs) or in the crawl subprocess's environment."""
    import threading
    import time

    from lookbench_live.testing.loopback_server import LoopbackServer

    canaries = {
        "VLLM_API_KEY": "canary-vllm-1b9f07e2",
        "OPENAI_API_KEY": "canary-openai-77c2ad41",
        "AWS_SECRET_ACCESS_KEY": "canary-aws-3e5d9c10",
    }
    prefect_home = tmp_path / "prefect"
    home = tmp_path / "lake"
    crawl_envs: list[dict[str, str]] = []
    done = threading.Event()

    def watch_crawls() -> None:  # the crawl subprocess's own environment, read while it runs
        while not done.is_set():
            for entry in Path("/proc").iterdir():
                try:
                    command = (entry / "cmdline").read_bytes()
                    if b"lookbench_live.scrapers.crawl" in command and str(home).encode() in command:
                        raw = (entry / "environ").read_bytes().decode(errors="replace")
                        crawl_envs.append(dict(i.split("=", 1) for i in raw.split("\0") if "=" in i))
                except OSError:
                    continue
            time.sleep(0.2)

    with (
        LoopbackServer(api_key=canaries["VLLM_API_KEY"]) as vlm,
        LoopbackServer(api_key=canaries["OPENAI_API_KEY"], model="gpt-5.1") as judge,
    ):
        config = tmp_path / "keys.toml"
        config.write_text(
            f'[annotation]\nbase_url = "{vlm.base_url}"\nmodel = "loopback-vlm"\n'
            f'[judge]\nbase_url = "{judge.base_url}"\nmodel = "gpt-5.1"\n'
            # The loopback VLM finds no street-look items, so the street subsets are empty: the
            # content check holds the release back (committed, unpublished) instead of stopping.
            '[release]\non_shortfall = "hold"\n'
        )
        watcher = threading.Thread(target=watch_crawls, daemon=True)
        watcher.start()
        # Any free port: no release of this run is compared with another's, and a fixed one in the
        # ephemeral range can be taken by the other worker's connections (EADDRINUSE).
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            store_port = probe.getsockname()[1]
        try:
            run = subprocess.run(
                [cli, "refresh", "--home", str(home), "--as-of", AS_OF, "--port", str(store_port),
                 "--config", str(config)],
                capture_output=True, text=True, timeout=1500,
                env={**os.environ, **canaries, "PREFECT_LOGGING_LEVEL": "DEBUG", "PREFECT_HOME": str(prefect_home)},
            )  # fmt: skip
        finally:
            done.set()
            watcher.join()
        vlm_keys = {h.get("authorization") for h in vlm.headers_seen}
        judge_keys = {h.get("authorization") for h in judge.headers_seen}
    assert run.returncode == 0, run.stderr[-4000:]
    # The keys were really read and sent: the servers refuse any request without them.
    assert vlm_keys == {f"Bearer {canaries['VLLM_API_KEY']}"}
    assert judge_keys == {f"Bearer {canaries['OPENAI_API_KEY']}"}
    assert crawl_envs, "the crawl subprocess was never seen"
    for env in crawl_envs:
        assert not set(canaries) & set(env) and not set(canaries.values()) & set(env.values())
    for value in canaries.values():
        assert value not in run.stdout and value not in run.stderr
    for root in (home, prefect_home):
        for path in root.rglob("*"):
            if path.is_file() and path.stat().st_size < 200_000_000:
                data = path.read_bytes()
                assert not any(v.encode() in data for v in canaries.values()), path


def test_a_wrong_setting_fails_at_start_naming_it(tmp_path: Path, cli: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[annotation]\nconcurrency = 0\n")
    home = tmp_path / "lake"
    run = subprocess.run(
        [cli, "refresh", "--config", str(config), "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "annotation.concurrency" in run.stderr
    assert not home.exists(), "no work may start before the configuration is valid"


def test_a_second_refresh_on_the_same_lake_exits_cleanly(tmp_path: Path, cli: str) -> None:
    lake = Lake(tmp_path / "lake")
    with lake.writer_lock("flow"):
        run = subprocess.run(
            [cli, "refresh", "--home", lake.home, "--port", str(PORT + 1)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert run.returncode != 0
    assert "writer lock" in run.stderr and "Traceback" not in run.stderr


def test_the_monthly_deployment_schedule() -> None:
    from lookbench_live.config import Settings
    from lookbench_live.flows.deploy import refresh_deployment

    deployment = refresh_deployment(Settings(), "/etc/lookbench/lookbench.toml")
    (schedule,) = deployment.schedules
    assert schedule.schedule.cron == "0 3 1 * *" and schedule.schedule.timezone == "UTC"
    assert deployment.parameters == {"config_path": "/etc/lookbench/lookbench.toml", "schedule": "0 3 1 * *"}
    custom = refresh_deployment(Settings(), None, cron="0 5 2 * *")
    assert custom.schedules[0].schedule.cron == "0 5 2 * *"
    assert custom.parameters["schedule"] == "0 5 2 * *"  # each run is versioned by its tick


def test_backfill_of_audit_or_evaluate_alone_runs_those_steps(reference: Path, cli: str) -> None:
    """`backfill --stages audit` and `--stages evaluate` run the audit, the evaluation and the report
    (issue 26 §1), on the version's committed release, which they never change: the report goes to
    `reports/<version>/`."""
    base = reference / "releases" / VERSION
    before = {p: p.read_bytes() for p in base.rglob("*") if p.is_file()}
    span = read_manifest(Lake(reference), VERSION)["window"]
    start, end = (dt.datetime.fromisoformat(span[k]).date().isoformat() for k in ("start", "end"))
    window = ["--start", start, "--end", end, "--version", VERSION]
    run = subprocess.run(
        [cli, "backfill", "--home", str(reference), *window, "--stages", "audit", "--stages", "evaluate"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for step in ("review", "audit", "evaluate", "report", "discard"):
        assert re.search(rf"^\| {step} \| ", run.stdout, re.M), run.stdout
    assert "baseline" in (reference / "reports" / VERSION / "report.html").read_text()
    assert {p: p.read_bytes() for p in base.rglob("*") if p.is_file()} == before
