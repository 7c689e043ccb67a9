# packager — the two commands a newcomer needs: `make package TASK=<id>` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATASET ?= samples
OUT ?= build
TASK ?=
ARGS ?=
JUDGE ?=
HARBOR_PYTHON ?= $(shell ls -d "$$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python 2>/dev/null | tail -n 1)

.PHONY: install docker registry package test check lint typecheck golden specs harbor hud bench clean help

help:
	@echo "make package TASK=<instance_id>   render, build and verify one task (samples by default)"
	@echo "make test                         the whole test suite, Docker end-to-end included"
	@echo "make check                        ruff, mypy and the tests"
	@echo "make golden                       rewrite the golden render trees (never in CI)"
	@echo "make specs                        regenerate packager/datasets/harness_specs.json (swebench 4.1.0)"
	@echo "make harbor                       the pinned Harbor 0.25 environment in .harbor/"
	@echo "make hud                          the pinned HUD SDK (hud 0.6.21) in .hud/"

$(BIN)/.installed: pyproject.toml requirements-test.txt requirements-specs.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,ray]'
	$(BIN)/pip install -q --no-deps -r requirements-test.txt
	$(BIN)/pip install -q --no-deps --upgrade --target $(VENV)/swebench-4.1.0 -r requirements-specs.txt
	@touch $@

install: $(BIN)/.installed

# A reachable Docker engine and the base images the samples need (idempotent, fast when done).
docker:
	@bash scripts/ensure-docker.sh

package: install docker $(if $(findstring harbor,$(ARGS)),harbor)
	@if [ -z "$(TASK)" ]; then echo "usage: make package TASK=<instance_id> [DATASET=...]"; \
	  $(BIN)/packager list --dataset $(DATASET); exit 2; fi
	$(BIN)/packager package $(TASK) --dataset $(DATASET) --out $(OUT) $(if $(JUDGE),--judge $(JUDGE)) $(ARGS)

harbor:
	@HARBOR_PYTHON="$(HARBOR_PYTHON)" bash scripts/ensure-harbor.sh

hud:
	@bash scripts/ensure-hud.sh

registry:
	@bash scripts/ensure-registry.sh

test: install docker harbor hud registry
	$(BIN)/python -m pytest $(ARGS)

lint: install
	$(BIN)/ruff check packager tests benchmarks templates
	$(BIN)/ruff format --check packager tests benchmarks templates
	$(BIN)/lint-imports --no-cache

typecheck: install
	$(BIN)/mypy packager

check: lint typecheck test

golden: install
	$(BIN)/python -m tests.golden.regenerate

# Regenerate packager/datasets/harness_specs.json from the pinned swebench release (never by hand).
specs: install
	$(BIN)/python scripts/harness_specs.py

bench: install docker harbor registry
	$(BIN)/python benchmarks/render.py
	$(BIN)/python benchmarks/verify.py
	$(BIN)/python benchmarks/engines.py
	$(BIN)/python benchmarks/judge.py
	$(BIN)/python benchmarks/executors.py

clean:
	rm -rf $(OUT) .pytest_cache .mypy_cache .ruff_cache
