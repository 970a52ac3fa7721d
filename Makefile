# surge — run `make help` for the list of targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: help build dev run test test-rust test-py lint fmt bench system-deps clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.deps: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "maturin>=1.5,<2" "orjson>=3.9" "uvloop>=0.19" "pytest>=8" "pytest-timeout>=2" "hypothesis>=6" "ruff>=0.5" "mypy>=1.10" "hdrhistogram>=0.10" "matplotlib>=3.7" "prometheus-client>=0.17" "trustme>=1.1" "starlette>=0.37" "fastapi>=0.110" "uvicorn>=0.29" "httptools>=0.6" "python-multipart>=0.0.9" "litestar>=2.8" "flask>=3" "django>=4.2" "gunicorn>=21" "redis>=5" "asyncpg>=0.29" "websockets>=12" "opentelemetry-sdk>=1.20"
	touch $@

build: $(VENV)/.deps ## release build of surge into .venv (the `surge` command lands on .venv/bin)
	$(VENV)/bin/maturin develop --release -q

dev: $(VENV)/.deps ## debug build (faster to compile)
	$(VENV)/bin/maturin develop -q

system-deps: ## install Tarantool, PostgreSQL, Redis, curl, wrk from Debian when missing
	./scripts/install-system-deps.sh

run: build system-deps ## serve examples/app.py on 127.0.0.1:8080 (starts the local Tarantool it needs)
	$(VENV)/bin/surge services up tarantool
	trap '$(VENV)/bin/surge services down' EXIT INT TERM; \
	SURGE_TARANTOOL_USER=surge SURGE_TARANTOOL_PASSWORD=surge-secret \
	$(VENV)/bin/surge serve examples.app:app --host 127.0.0.1 --port 8080

test: build system-deps test-rust test-py ## everything: system packages, build, cargo test, pytest

test-rust:
	cargo test --workspace -q

test-py:
	$(PY) -m pytest -q -p no:cacheprovider tests

lint: $(VENV)/.deps ## ruff check + format check, cargo fmt --check, cargo clippy -D warnings
	$(VENV)/bin/ruff check python tests benchmarks examples
	$(VENV)/bin/ruff format --check python tests benchmarks examples
	$(VENV)/bin/mypy --ignore-missing-imports python/surge/http python/surge/serve python/surge/asgi python/surge/wsgi python/surge/websocket python/surge/redis python/surge/postgres python/surge/tarantool python/surge/engine.py python/surge/endpoint.py python/surge/errors.py python/surge/__init__.py python/surge/stats python/surge/tracing.py
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -q -- -D warnings

fmt: $(VENV)/.deps ## format Python and Rust
	$(VENV)/bin/ruff format python tests benchmarks examples
	$(VENV)/bin/ruff check --fix python tests benchmarks examples
	cargo fmt --all

bench: build ## side-by-side benchmarks with the peers; results under bench-results/
	$(PY) -m benchmarks.run

clean:
	rm -rf target $(VENV) bench-results/raw
