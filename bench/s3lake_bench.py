"""What the lake's always-fresh listings cost on S3: `Lake` on a local moto S3 server, in one run.

    .venv/bin/python bench/s3lake_bench.py [--fragments 40] [--reads 20]

`Lake("s3://…")` opens s3fs with `use_listings_cache=False` so a long-lived process sees what
other processes commit (tests/warehouse/test_s3_lake.py). This measures, against the same moto server:
- `append` of N one-row fragments (each append lists the table to find committed keys);
- R full reads of the table (`Lake.read`: on object stores one concurrent GET per fragment),
  R `keys()` calls, and R reads through a plain pyarrow dataset over the fsspec filesystem
  (the generic path, which `Lake.read` used before);
for the lake as shipped (no listings cache) and with s3fs's default cache
(`storage_options={"use_listings_cache": True}`, which serves stale listings), plus a local
lake as a floor. Prints a Markdown table and the ratios. moto is slower than MinIO or S3 per
request; treat the ratios, not the times, as the result.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time
import uuid

import pyarrow.dataset as pads

from lookbench_live.schema.records import Rejection, arrow_schema_of
from lookbench_live.warehouse.lake import Lake


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def measure(lake: Lake, fragments: int, reads: int) -> dict[str, float]:
    start = time.perf_counter()
    for n in range(fragments):
        lake.append([Rejection(stage="bench", item=f"i{n}", reason="r", detail="", run_id="b")])
    appended = time.perf_counter()
    for _ in range(reads):
        assert lake.read("rejections").num_rows == fragments
    read = time.perf_counter()
    for _ in range(reads):
        lake._key_cache.clear()  # what a new process, or another Lake, pays
        assert len(lake.keys("rejections")) == fragments
    keys = time.perf_counter()
    # The generic path: a pyarrow dataset over the fsspec filesystem (per-file metadata and ranged reads).
    files = lake.fragments("rejections")
    schema = arrow_schema_of(Rejection)
    for _ in range(reads):
        assert (
            pads.dataset(files, schema=schema, filesystem=lake.fs, format="parquet").to_table().num_rows
            == fragments
        )
    generic = time.perf_counter()
    return {
        "append_ms": 1000 * (appended - start) / fragments,
        "read_ms": 1000 * (read - appended) / reads,
        "keys_ms": 1000 * (keys - read) / reads,
        "generic_ms": 1000 * (generic - keys) / reads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=40)
    parser.add_argument("--reads", type=int, default=20)
    args = parser.parse_args()

    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_DEFAULT_REGION="us-east-1",
    )
    import s3fs

    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    s3fs.S3FileSystem(skip_instance_cache=True).mkdir(bucket)
    rows = {}
    try:
        rows["S3, Lake as shipped (no listings cache)"] = measure(
            Lake(f"s3://{bucket}/fresh"), args.fragments, args.reads
        )
        rows["S3, s3fs default listings cache (stale across processes)"] = measure(
            Lake(f"s3://{bucket}/cached", storage_options={"use_listings_cache": True}),
            args.fragments,
            args.reads,
        )
        with tempfile.TemporaryDirectory() as tmp:
            rows["local folder"] = measure(Lake(tmp), args.fragments, args.reads)
    finally:
        server.stop()
    print(f"fragments={args.fragments} reads={args.reads}\n")
    print("| lake | append ms/fragment | Lake.read ms | keys ms/call | pyarrow dataset via fsspec ms |")
    print("|---|---|---|---|---|")
    for name, row in rows.items():
        print(
            f"| {name} | {row['append_ms']:.1f} | {row['read_ms']:.1f} | {row['keys_ms']:.1f} "
            f"| {row['generic_ms']:.1f} |"
        )
    fresh = rows["S3, Lake as shipped (no listings cache)"]
    cached = rows["S3, s3fs default listings cache (stale across processes)"]
    print(
        f"Lake.read vs pyarrow dataset via fsspec, both uncached: {fresh['generic_ms'] / fresh['read_ms']:.2f}x faster"
    )
    print(
        "ratio shipped / cached: "
        + ", ".join(
            f"{k.removesuffix('_ms')} {fresh[k] / cached[k]:.2f}x"
            for k in ("append_ms", "read_ms", "keys_ms", "generic_ms")
        )
    )


if __name__ == "__main__":
    main()
