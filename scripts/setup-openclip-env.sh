#!/usr/bin/env bash
# Install the `models` extra's packages (open_clip_torch, ftfy, timm, torchvision) into a folder
# beside the project venv, for tests/evaluation/test_evaluation_openclip.py.
#
# Why not the project venv: PyPI's torchvision is a CUDA build that cannot import beside this
# machine's CPU torch without a shim (scripts/openclip_shim/sitecustomize.py), and a broken
# torchvision in the project venv would change what transformers imports for every test. The
# test runs its check in a subprocess with PYTHONPATH=<shim>:<this folder>, so nothing else
# sees these packages. The worker image installs the same extra with a matching torchvision.
#
# Idempotent: a folder whose packages import at the pinned versions is left alone (--force rebuilds).
# Usage: bash scripts/setup-openclip-env.sh [--force]
# Env:   LOOKBENCH_OPENCLIP_ENV (default: <repo>/.venv-openclip), VENV (default: <repo>/.venv)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${LOOKBENCH_OPENCLIP_ENV:-$REPO/.venv-openclip}"
VENV="${VENV:-$REPO/.venv}"
# The versions the worker image resolves today (pyproject's `models` extra gives the ranges).
PINS=(torchvision==0.28.0 timm==1.0.31 open_clip_torch==3.3.0 ftfy==6.3.1 wcwidth==0.9.4)

log() { printf '[setup-openclip-env] %s\n' "$*"; }
check() {
    HF_HUB_OFFLINE=1 PYTHONPATH="$REPO/scripts/openclip_shim:$TARGET" "$VENV/bin/python" -c '
import sys, open_clip, timm, torchvision, ftfy
want = dict(a.split("==") for a in sys.argv[1:])
have = {"open_clip_torch": open_clip.__version__, "timm": timm.__version__,
        "torchvision": torchvision.__version__.split("+")[0], "ftfy": ftfy.__version__}
bad = {k: v for k, v in have.items() if want.get(k) not in (None, v)}
sys.exit(f"versions differ: {bad}" if bad else 0)' "${PINS[@]}"
}

if [[ "${1:-}" != "--force" ]] && [[ -d "$TARGET" ]] && check 2>/dev/null; then
    log "ok: $TARGET imports open_clip, timm, torchvision, ftfy at the pinned versions"
    exit 0
fi
rm -rf "$TARGET"
# --no-deps: torch, huggingface_hub, safetensors, regex, pyyaml, tqdm come from the project venv;
# the constraints keep pip from fetching another torch.
"$VENV/bin/pip" install -q --no-deps -c "$REPO/constraints.txt" --target "$TARGET" "${PINS[@]}"
check || { printf '[setup-openclip-env] ERROR: the installed packages do not import\n' >&2; exit 1; }
log "installed into $TARGET: ${PINS[*]}"
