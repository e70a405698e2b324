# Everything a fresh machine of this kind needs is installed from here.
# `make run` sets up and runs the main job; `make test` sets up and runs the tests (what CI runs).

VENV        ?= .venv
PY          := $(VENV)/bin/python
PIP         := $(VENV)/bin/pip
STAMP       := $(VENV)/.installed
PYTHON      ?= python3

export HF_HUB_OFFLINE := 1
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: setup system vllm-venv openclip-env run test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip
	# The CPU build of torch first; the constraints file then stops pip from pulling a CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[test]'
	# The official evaluator, as the peer the evaluation tests compare Recall@K with (its own pins
	# are too old for this stack: no deps; it installs only a `look_bench` package).
	$(PIP) install -q --no-deps look-bench==0.4.0
	touch $@

setup: $(STAMP) system

system:
	bash scripts/install-system.sh

vllm-venv:
	bash scripts/setup-vllm-venv.sh

# The `models` extra (open_clip, ftfy, timm, torchvision) beside the venv, for the open_clip tests:
# PyPI's torchvision cannot import beside the CPU torch inside the venv (scripts/setup-openclip-env.sh).
openclip-env: setup
	bash scripts/setup-openclip-env.sh

run: setup
	$(VENV)/bin/lookbench-live refresh

test: setup vllm-venv openclip-env
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	# The import contract and the public API's types (pyproject [tool.importlinter], [tool.mypy]).
	$(PY) scripts/package_checks.py imports
	$(PY) scripts/package_checks.py types
	# Two workers, a test module each at a time: CI stays well under its 30 minutes.
	# A required stack that is missing fails its tests rather than skipping them (setup installs each).
	LOOKBENCH_REQUIRE_VLLM=1 LOOKBENCH_REQUIRE_OPENCLIP=1 LOOKBENCH_REQUIRE_BROWSER=1 $(VENV)/bin/pytest -q -n 2 --dist loadfile

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	$(PY) scripts/package_checks.py imports
	$(PY) scripts/package_checks.py types

clean:
	rm -rf $(VENV) .venv-vllm .venv-openclip lookbench-data build dist *.egg-info
