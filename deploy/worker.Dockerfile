# The lookbench-live worker: runs `lookbench-live serve` (the scheduled monthly refresh) and the
# flows it starts. Build from the repository root:
#   docker build -f deploy/worker.Dockerfile -t lookbench-live-worker .
FROM python:3.11-slim

# Playwright drives Debian's chromium by path (`playwright install` is not used); jpegtran turns
# EXIF-rotated JPEGs upright losslessly at ingestion.
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium libjpeg-turbo-progs \
 && rm -rf /var/lib/apt/lists/*

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# torch and torchvision first, from one index (TORCH_INDEX_URL: the CPU build by default, a CUDA
# one for a GPU worker), pinned as in constraints.txt; the constraints file then stops pip from
# replacing either with another build. torchvision must match torch: open_clip, timm and DINOv3's
# image processor import it (the `models` extra).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --index-url "${TORCH_INDEX_URL}" torch==2.13.0 torchvision==0.28.0

WORKDIR /src
COPY . /src
# `models`: open_clip_torch, ftfy, timm for Marqo-FashionCLIP/FashionSigLIP (tests/test_worker_models.py
# checks that every model deploy/lookbench.toml names has what it imports from this line).
RUN pip install -c constraints.txt "/src[s3,dask,models]" \
 && pip check

# An unprivileged user; its state (Prefect home, model caches) lives in the named volume.
RUN useradd --system --create-home --home-dir /var/lib/lookbench lookbench \
 && mkdir -p /var/lib/lookbench/prefect /var/lib/lookbench/hf /var/lib/lookbench/cache /etc/lookbench \
 && chown -R lookbench:lookbench /var/lib/lookbench
COPY deploy/lookbench.toml /etc/lookbench/lookbench.toml

USER lookbench
WORKDIR /var/lib/lookbench
ENV LOOKBENCH_CONFIG=/etc/lookbench/lookbench.toml \
    PREFECT_HOME=/var/lib/lookbench/prefect \
    HF_HOME=/var/lib/lookbench/hf \
    LOOKBENCH_CACHE=/var/lib/lookbench/cache

CMD ["lookbench-live", "serve", "--config", "/etc/lookbench/lookbench.toml"]
