# One entry point for a fresh machine: `make test` builds .venv and runs the suite.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: install test reproduce bench clean

# pyproject.toml declares ranges; constraints.txt holds the exact versions the checks run on.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade-strategy only-if-needed -c constraints.txt -e ".[test]"
	touch $@

install: $(VENV)/.installed

test: install
	MPLBACKEND=Agg $(PY) -m pytest -q -m "not slow"

reproduce: install
	$(VENV)/bin/agnostophobia reproduce lenet++

bench: install
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
