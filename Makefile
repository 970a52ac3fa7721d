# surge — run `make help` for the list of targets.
SHELL := /bin/bash
VENV ?= .venv
WHEEL_VENV ?= .venv-wheel
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export PATH := $(abspath $(VENV))/bin:$(HOME)/.cargo/bin:$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: help build dev wheel docs fuzz run test test-rust test-py test-wheel lint fmt bench system-deps clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.deps: pyproject.toml scripts/requirements.py
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PY) scripts/requirements.py dev test docs > $(VENV)/requirements.txt
	$(PIP) install -q -r $(VENV)/requirements.txt
	touch $@

build: $(VENV)/.deps ## release build of surge into .venv (the `surge` command lands on .venv/bin)
	@# an extension from a build before the abi3 wheel would shadow the new one
	rm -f python/surge/_core.cpython-*.so
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

wheel: $(VENV)/.deps ## build the abi3 wheel (CPython >= 3.11, manylinux) into dist/
	rm -f dist/surge-*.whl
	$(VENV)/bin/maturin build --release -q -o dist

docs: $(VENV)/.deps ## the documentation site into site/ (warnings are errors)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site

test: system-deps wheel test-rust test-wheel ## everything: system packages, the wheel, cargo test, pytest against the installed wheel

test-rust:
	cargo test --workspace -q

test-py: ## pytest against the development build in .venv (`make build` first)
	$(PY) -m pytest -q -p no:cacheprovider tests

# The suite runs against the wheel installed in a fresh virtualenv, not the source tree,
# so a file missing from the wheel or an undeclared dependency fails here.
test-wheel:
	rm -rf $(WHEEL_VENV)
	python3 -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/pip install -q --upgrade pip
	$(WHEEL_VENV)/bin/pip install -q "$$(ls dist/surge-*.whl)[test,docs]"
	$(WHEEL_VENV)/bin/python scripts/check_installed.py
	$(WHEEL_VENV)/bin/python -m pytest -q -p no:cacheprovider tests

lint: build ## ruff, mypy, stubtest of _core.pyi against the built extension, cargo fmt, clippy
	$(VENV)/bin/ruff check python tests benchmarks examples scripts
	$(VENV)/bin/ruff format --check python tests benchmarks examples scripts
	$(VENV)/bin/mypy --ignore-missing-imports python/surge
	$(PY) -m mypy.stubtest --concise --ignore-disjoint-bases --allowlist python/surge/_core.stubtest-allowlist surge._core
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -q -- -D warnings

fmt: $(VENV)/.deps ## format Python and Rust
	$(VENV)/bin/ruff format python tests benchmarks examples
	$(VENV)/bin/ruff check --fix python tests benchmarks examples
	cargo fmt --all

FUZZ_SECONDS ?= 60
fuzz: ## run every fuzz target for FUZZ_SECONDS each (installs nightly and cargo-fuzz when missing)
	rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	command -v cargo-fuzz >/dev/null || cargo install -q cargo-fuzz
	cd crates/surge-proto/fuzz && for t in $$(cargo +nightly fuzz list); do \
	  mkdir -p corpus/$$t seeds/$$t; \
	  dict=""; case $$t in http1_*) dict="-dict=http1.dict";; esac; \
	  cargo +nightly fuzz run $$t corpus/$$t seeds/$$t -- -max_total_time=$(FUZZ_SECONDS) $$dict || exit 1; \
	done

bench: build ## side-by-side benchmarks with the peers; results under bench-results/
	$(PY) -m benchmarks.run

clean:
	rm -rf target $(VENV) $(WHEEL_VENV) dist bench-results/raw
