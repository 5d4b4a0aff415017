# The README's two commands: `make serve` and `make test`. Both set up a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PACKAGES := charter grammar policy engine api

.PHONY: install system-packages bench-packages lint typecheck quick check test pytest test-postgres fuzz bench serve fmt docs clean screenshots

# $(call timed,PART,COMMAND): run a part of `make check` or `make test` and say how long
# it took, in seconds; the part's exit status is make's.
timed = @echo "== $(1)"; start=$$(date +%s%N); $(2); status=$$?; \
	tenths=$$(( ($$(date +%s%N) - start) / 100000000 )); \
	echo "== $(1): $$((tenths / 10)).$$((tenths % 10)) s"; exit $$status

# Python writes and reuses its bytecode caches here even where the environment turns
# them off: without them each `charter` a test starts in a subprocess compiles every
# module of the service from source (0.25 s of CPU), and each pytest worker rewrites
# and compiles every test module again on every run.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml
	$(call timed,install,$(PYTHON) -m venv $(VENV) \
		&& $(PY) -m pip install --quiet -e '.[test]' \
		&& touch $(STAMP))

# The store tests start a PostgreSQL server of their own (tests/pgserver.py) from its
# binaries: found with pg_config or under /usr/lib/postgresql; the console's tests drive
# Debian's Chromium (tests/api/test_console.py). What of the two is missing is installed
# here with one apt-get (as root: a fresh Debian machine, CI; anyone else is told).
# Quiet when both are there.
PG_FOUND := test -x "$$(pg_config --bindir 2>/dev/null)/initdb" \
	|| ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
CHROMIUM_FOUND := test -x /usr/bin/chromium

system-packages:
	@missing=""; $(PG_FOUND) || missing="postgresql"; \
	$(CHROMIUM_FOUND) || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "warning: missing $$missing: the store tests need postgresql," \
				"the console's tests chromium (install them)" >&2; \
			exit 0; fi; \
		echo "== installing $$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		{ apt-get install -y -qq $$missing >/dev/null 2>&1 \
			|| { apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; }; } \
		&& { $(PG_FOUND); } && $(CHROMIUM_FOUND); fi

# The virtualenv and the Debian packages are installed side by side (pip and apt-get
# each wait on downloads most of the time).
install:
	@$(MAKE) --no-print-directory -j2 $(STAMP) system-packages

lint: install
	$(call timed,lint,$(VENV)/bin/ruff check $(PACKAGES) tests bench \
		&& $(VENV)/bin/ruff format --check $(PACKAGES) tests bench)

typecheck: install
	$(call timed,typecheck,$(VENV)/bin/mypy $(PACKAGES) bench tests)

# The quick tests: the unit tests (tests/test_*.py) and the store's, less those marked
# `slow` (the wheel, files of many megabytes); tests/api, tests/fit and tests/property
# run in `make test`.
quick: install
	$(call timed,quick tests,HYPOTHESIS_PROFILE=fast $(VENV)/bin/pytest -n 2 --dist worksteal \
		-m "not slow" tests/test_*.py tests/store)

check: lint typecheck quick

# The types are checked beside the tests (mypy is one process; the tests leave part of
# the two cores idle while they wait on servers), and either failing fails `make test`.
test: lint
	@$(MAKE) --no-print-directory -j2 typecheck pytest

pytest: install
	$(call timed,tests,HYPOTHESIS_PROFILE=fast $(VENV)/bin/pytest -n 4 --dist worksteal --durations=20)

# Every API test that uses the harness on both stores, SQLite and PostgreSQL (`make test`
# runs the modules that set `STORES = BOTH` on both, the rest on SQLite alone).
test-postgres: install
	$(call timed,tests on both stores,CHARTER_TEST_STORES=all HYPOTHESIS_PROFILE=fast \
		$(VENV)/bin/pytest -n 2 --dist worksteal tests/api)

# The console's screenshots in docs/console/ (what the README shows), taken again by its
# browser tests.
screenshots: install
	CHARTER_SCREENSHOTS=1 $(VENV)/bin/pytest -q tests/api/test_console.py

# `make fuzz MINUTES=N`: every fuzz target within N minutes (docs/review.md): the
# hypothesis properties (at most EXAMPLES examples each), atheris on the parser and
# checker, compile + decide against the reference, the fit check and the HTTP request
# readers, and schemathesis against a live `charter serve`; the report in fuzz-report/.
# Its tools (atheris, schemathesis, coverage: the `fuzz` extra) are kept out of `make test`.
MINUTES ?= 10
EXAMPLES ?= 20000

$(VENV)/.fuzz-stamp: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,fuzz]'
	touch $(VENV)/.fuzz-stamp

fuzz: $(VENV)/.fuzz-stamp system-packages
	$(PY) -m tests.fuzz.run --minutes $(MINUTES) --examples $(EXAMPLES) --out fuzz-report

# The benchmarks compare with Cedar too (cedarpy, the `bench` extra), kept out of `make test`.
$(VENV)/.bench-stamp: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(VENV)/.bench-stamp

# The store benchmark's load comes from wrk (bench/wrkload.py): installed here when missing
# (as root), else bench.store_bench falls back to its asyncio client and says so.
bench-packages:
	@command -v wrk >/dev/null || { [ "$$(id -u)" = 0 ] \
		&& { export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq wrk >/dev/null 2>&1 \
			|| { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }; } \
		|| echo "warning: wrk is missing: bench.store_bench loads with its asyncio client" >&2; }

bench: $(VENV)/.bench-stamp bench-packages
	$(PY) -m bench.run
	$(PY) -m bench.change_bench
	$(PY) -m bench.start_bench
	$(PY) -m bench.http_bench
	$(PY) -m bench.store_bench
	$(PY) -m bench.fit_bench
	$(PY) -m bench.soak

fmt: install
	$(VENV)/bin/ruff format $(PACKAGES) tests bench
	$(VENV)/bin/ruff check --fix $(PACKAGES) tests bench

# docs/http-reference.md is generated from the route table and the models (a test fails
# when it is stale).
docs: install
	$(PY) -m api.http.docgen > docs/http-reference.md

serve: install
	$(VENV)/bin/charter serve --db charter.db --workspace fixtures/workspace --host 127.0.0.1 --port 8080

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis fuzz-report
