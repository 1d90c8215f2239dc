# One entry point for a fresh machine: `make test` builds .venv and runs the suite.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: install test test-slow test-all docs reproduce bench clean

# pyproject.toml declares ranges; constraints.txt holds the exact versions the checks run on.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade-strategy only-if-needed -c constraints.txt -e ".[test,docs]"
	touch $@

install: $(VENV)/.installed

# The suite runs in one pytest worker per core, up to 4 (pytest-xdist; each worker builds the session
# fixtures it needs, a GB of memory or two, so a many-core machine does not get one per core); a
# module's tests stay on one worker (--dist loadscope), which builds the module's fixtures once.
# PYTEST_WORKERS=0 runs it in this process alone.
PYTEST_WORKERS ?= auto
PYTEST := MPLBACKEND=Agg $(PY) -m pytest -q -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadscope

# The suite within 10 minutes on two cores; the tests marked slow (real-data trainings, full kill
# sweeps) run in `make test-slow`, which CI runs too.
test: install
	$(PYTEST) -m "not slow"

test-slow: install
	$(PYTEST) -m slow

# Both in one session (what CI runs): the fixtures both share (the tiny run, its calibrated copy, the
# modules' smoke runs) are built once per worker, and the suite is collected once.
test-all: install
	$(PYTEST)

# The documentation site (docs/_build/html): the same .venv with the [docs] extra; warnings are
# errors, references are checked (nitpicky), the gallery's examples run. No network at build time.
# -E: every page is read again, so the references generated from the code are never stale.
# (The [docs] extra is in the one install: the tests of the generated references import Sphinx.)
docs: install
	MPLBACKEND=Agg $(PY) -m sphinx -b html -E -W --keep-going -n -j 1 docs docs/_build/html
	@echo "the site: docs/_build/html/index.html"

reproduce: install
	$(VENV)/bin/agnostophobia reproduce lenet++

bench: install
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache docs/_build docs/gallery docs/reference/generated docs/sg_execution_times.rst
