# The README's two commands: `make serve` and `make test`. Both set up a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PACKAGES := grammar policy engine api

.PHONY: install lint typecheck test fuzz bench serve fmt clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(VENV)/bin/ruff check $(PACKAGES) tests bench
	$(VENV)/bin/ruff format --check $(PACKAGES) tests bench

typecheck: install
	$(VENV)/bin/mypy $(PACKAGES) bench tests

test: lint typecheck
	HYPOTHESIS_PROFILE=fast $(VENV)/bin/pytest -n 2 --dist worksteal

fuzz: install
	HYPOTHESIS_PROFILE=long CHARTER_TEST_UPLOADS=500 $(VENV)/bin/pytest tests/property tests/fit \
		tests/api/test_log_properties.py tests/api/test_upload_memory.py \
		tests/api/test_api_fuzz.py tests/api/test_solver_gate.py \
		"tests/store/test_sqlite.py::test_reading_the_log_anywhere_in_its_runs" \
		"tests/store/test_revision_deltas.py::test_any_sequence_of_changes_reads_back" -q

# The benchmarks compare with Cedar too (cedarpy, the `bench` extra), kept out of `make test`.
$(VENV)/.bench-stamp: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(VENV)/.bench-stamp

bench: $(VENV)/.bench-stamp
	$(PY) -m bench.run
	$(PY) -m bench.http_bench
	$(PY) -m bench.fit_bench
	$(PY) -m bench.soak

fmt: install
	$(VENV)/bin/ruff format $(PACKAGES) tests bench
	$(VENV)/bin/ruff check --fix $(PACKAGES) tests bench

serve: install
	$(VENV)/bin/charter serve --db charter.db --workspace fixtures/workspace --host 127.0.0.1 --port 8080

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
