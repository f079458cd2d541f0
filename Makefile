# Two commands set everything up on a fresh machine:
#   make demo   -- create .venv, install, run the quick sweep, fit, plot, report
#   make test   -- create .venv, install, run the test suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install demo test bench clean slurm

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

# Single-node SLURM (root; Debian packages; no systemd) for tests/test_slurm.py and local sweeps.
slurm:
	bash scripts/slurm-up.sh

clean:
	rm -rf $(VENV) results outputs multirun
