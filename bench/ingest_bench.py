"""Image ingestion throughput against img2dataset 1.47 on the same loopback URL list, in the same run.

    .venv/bin/python bench/ingest_bench.py [--images 5000] [--workers 2] [--i2d /tmp/i2d-venv/bin/img2dataset]

Serves N generated ~90 kB JPEGs (800×1000) from 127.0.0.1 with nginx when installed
(`apt-get install -y nginx`), else a threaded Python server (the output says which), then
measures wall-clock images/s of:
- `ingest_images` (fetch with the guard, robots and pacing, validate by decoding, perceptual
  hashes, strip metadata, sha256, store in a lake made durable per batch, write the `images`
  rows), with `workers` bounded decode processes;
- img2dataset 1.47 from its own venv, `--processes_count 2 --thread_count 32
  --disable_all_reencoding True --output_format files` (fetch and write, no decode);
- a plain asyncio httpx fetch loop (fetch only, one process), as a floor for httpx itself.
Each run starts from an empty output. Prints one Markdown table row per tool and the ratio.
CPU is user+sys of this process and its reaped children (the decode workers, img2dataset);
nginx's own CPU is not counted for anyone. Run it 2-3 times on a shared machine and report
the median ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

from lookbench_live.config import IngestSettings
from lookbench_live.ingest import ImageRequest, ingest_images
from lookbench_live.schema.records import utcnow
from lookbench_live.warehouse.lake import Lake

NGINX_CONF = """
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port};
    root {root}/www;
    location / {{ default_type image/jpeg; }}
  }}
}}
"""


def make_images(www: Path, count: int) -> None:
    """Deterministic, distinct ~90 kB JPEGs (reused between runs)."""
    www.mkdir(parents=True, exist_ok=True)
    if len(list(www.glob("*.jpg"))) >= count:
        return
    rng = np.random.default_rng(0)
    # A few smooth textured bases; each file gets its own noise so every sha256 differs.
    yy, xx = np.mgrid[0:1000, 0:800]
    bases = [
        (127 + 60 * np.sin(xx / (7 + k)) * np.cos(yy / (11 + k)))[..., None] * np.array([1.0, 0.8, 0.6])
        for k in range(8)
    ]
    for i in range(count):
        path = www / f"{i:06d}.jpg"
        if path.exists():
            continue
        noise = rng.normal(0, 2, (1000, 800, 1))
        pixels = np.clip(bases[i % 8] + noise, 0, 255).astype(np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, "JPEG", quality=80)
        path.write_bytes(out.getvalue())


class Server:
    def __init__(self, root: Path):
        self.root = root
        self.kind = "nginx" if shutil.which("nginx") else "python ThreadingHTTPServer"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._httpd: ThreadingHTTPServer | None = None

    def __enter__(self) -> Server:
        if self.kind == "nginx":
            with socket_port() as port:
                self.port = port
            conf = self.root / "nginx.conf"
            conf.write_text(NGINX_CONF.format(root=self.root, port=self.port))
            self._proc = subprocess.Popen(["nginx", "-c", str(conf), "-g", "daemon off;"])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    httpx.get(f"http://127.0.0.1:{self.port}/000000.jpg", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
        else:
            handler = partial(_QuietHandler, directory=str(self.root / "www"))
            self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            self._httpd.daemon_threads = True
            self.port = self._httpd.server_address[1]
            threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        if self._httpd is not None:
            self._httpd.shutdown()


class _QuietHandler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass


class socket_port:
    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def run_ours(urls: list[str], workers: int, scratch: Path) -> tuple[float, str]:
    lake_dir = scratch / f"lake-{workers}"
    shutil.rmtree(lake_dir, ignore_errors=True)
    lake = Lake(lake_dir)
    settings = IngestSettings(allow_private_addresses=True, workers=workers, concurrency=32, shard_size=500)
    now = utcnow()
    requests = [
        ImageRequest(
            url=u, owner_kind="product", owner_id=f"bench:{i}", source="bench", position=0, first_seen_at=now
        )
        for i, u in enumerate(urls)
    ]
    start = time.perf_counter()
    result = ingest_images(lake, settings, requests, run_id="bench")
    elapsed = time.perf_counter() - start
    note = f"ok={result.ok} rejected={result.rejected_by_reason}"
    assert lake.read("images").num_rows == len(urls)
    return elapsed, note


def run_img2dataset(urls: list[str], binary: str, scratch: Path) -> tuple[float, str]:
    url_file = scratch / "urls.txt"
    url_file.write_text("\n".join(urls) + "\n")
    out = scratch / "i2d-out"
    shutil.rmtree(out, ignore_errors=True)
    command = [
        binary, "--url_list", str(url_file), "--input_format", "txt", "--output_folder", str(out),
        "--output_format", "files", "--processes_count", "2", "--thread_count", "32",
        "--disable_all_reencoding", "True", "--enable_wandb", "False",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"img2dataset failed: {done.stderr[-2000:]}")
    stored = len(list(out.rglob("*.jpg")))
    return elapsed, f"stored={stored}"


def run_plain_httpx(urls: list[str]) -> tuple[float, str]:
    async def main() -> tuple[int, int]:
        limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
        async with httpx.AsyncClient(limits=limits) as client:
            queue = iter(urls)
            total = ok = 0

            async def worker() -> None:
                nonlocal total, ok
                for url in queue:
                    response = await client.get(url)
                    total += len(response.content)
                    ok += response.status_code == 200

            await asyncio.gather(*(worker() for _ in range(32)))
            return ok, total

    start = time.perf_counter()
    ok, total = asyncio.run(main())
    return time.perf_counter() - start, f"status 200: {ok}, bytes={total}"


def measured(run, *args: object) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (this process and reaped children: workers, img2dataset), note."""
    before = time.process_time() + _children_cpu()
    seconds, note = run(*args)
    return seconds, time.process_time() + _children_cpu() - before, note


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 0])
    parser.add_argument("--i2d", default="/tmp/i2d-venv/bin/img2dataset")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "lookbench-ingest-bench"))
    args = parser.parse_args()
    root = Path(args.data)
    make_images(root / "www", args.images)
    sizes = [p.stat().st_size for p in sorted((root / "www").glob("*.jpg"))[: args.images]]
    print(
        f"{args.images} JPEGs, mean {sum(sizes) / len(sizes) / 1000:.1f} kB; {os.cpu_count()} CPUs",
        flush=True,
    )
    rows: list[tuple[str, float, float, str]] = []
    with Server(root) as server, tempfile.TemporaryDirectory() as tmp:
        print(f"server: {server.kind} on 127.0.0.1:{server.port}", flush=True)
        if server.kind != "nginx":
            # The Python server takes a share of the same cores: ratios are not comparable
            # with the nginx figures in docs/benchmarks.md.
            print("warning: nginx not found (apt-get install -y nginx); ratios are noisier", file=sys.stderr)
        urls = [f"http://127.0.0.1:{server.port}/{i:06d}.jpg" for i in range(args.images)]
        scratch = Path(tmp)
        if Path(args.i2d).exists():
            rows.append(
                ("img2dataset 1.47 (no re-encoding)", *measured(run_img2dataset, urls, args.i2d, scratch))
            )
        else:
            print(f"img2dataset not found at {args.i2d}", file=sys.stderr)
        for workers in args.workers:
            rows.append((f"ingest_images, workers={workers}", *measured(run_ours, urls, workers, scratch)))
        rows.append(
            ("plain asyncio httpx fetch loop (1 process, no decode)", *measured(run_plain_httpx, urls))
        )
    peer = rows[0][1] if rows and rows[0][0].startswith("img2dataset") else None
    peer_cpu = rows[0][2] if peer else None
    print(f"load average before the report: {os.getloadavg()[0]:.1f}")
    print("| tool | wall s | images/s | rate ratio vs img2dataset | CPU ms/image | CPU ratio | note |")
    print("|---|---|---|---|---|---|---|")
    for name, seconds, cpu, note in rows:
        ratio = f"{peer / seconds:.2f}" if peer else "–"
        cpu_ratio = f"{cpu / peer_cpu:.2f}" if peer_cpu else "–"
        print(
            f"| {name} | {seconds:.2f} | {args.images / seconds:.0f} | {ratio} "
            f"| {cpu / args.images * 1000:.2f} | {cpu_ratio} | {note} |"
        )


if __name__ == "__main__":
    main()
