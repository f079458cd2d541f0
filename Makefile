# Two commands set everything up on a fresh machine:
#   make demo   -- create .venv, install, run the quick sweep, fit, plot, report
#   make test   -- create .venv, install, run the test suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint bench bench-gpu clean slurm

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The demo: the quick sweep (2 single-threaded runs at a time), the fits, the figures, the report.
demo: $(STAMP)
	$(VENV)/bin/scaling sweep quick
	$(VENV)/bin/scaling fit results/quick --approach all --bootstrap 1000 --out results/quick/fit.json
	$(VENV)/bin/scaling optimal --budget 1e15 --law results/quick/fit.json
	$(VENV)/bin/scaling plot results/quick --fit results/quick/fit.json --out reports/quick
	$(VENV)/bin/scaling report results/quick --fit results/quick/fit.json --out reports/quick/report.html
	@echo "report: reports/quick/report.html (and report.md beside it)"

# The tests. In CI (CI=true, as root) a single-node SLURM is installed and started first, so the
# SLURM test runs for real; elsewhere it is skipped unless SLURM is already up. Two pytest-xdist
# workers: the CI machine has 2 cores and most tests wait on the subprocesses they start. As root, Debian's
# chromium is installed if missing: tests/test_report.py opens the report in it (required in CI).
test: lint
	@if [ -n "$$CI" ] && [ "$$(id -u)" = 0 ]; then bash scripts/slurm-up.sh; fi
	@if [ "$$(id -u)" = 0 ] && ! command -v chromium >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; fi
	$(PY) -m pytest -q -n 2

# Lint and format check (ruff, from the dev extras); `make test` and so CI run it first.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Benchmarks (not run by the tests; meaningful on a quiet machine): matmul peak, trainer MFU against
# the textbook model, the quick sweep against its ideal, the approach-3 fit against the exhaustive grid, `compare` with 1,000 resamples,
# `scaling prepare` against the tokenizer's own encode_batch.
bench: $(STAMP)
	$(PY) bench/bench_peak.py
	$(PY) bench/bench_trainer.py
	$(PY) bench/bench_sweep.py quick
	$(PY) bench/bench_fit.py
	$(PY) bench/bench_compare.py
	$(PY) bench/bench_approach1.py
	$(PY) bench/bench_cli.py
	$(PY) bench/bench_prepare.py

# On a CUDA machine: the trainer on the GPU (MFU against its bf16 peak, compiled vs eager vs
# textbook) and the CUDA paths end to end (runs, preemption and resume, the quick sweep, the report).
bench-gpu: $(STAMP)
	$(PY) bench/bench_gpu.py
	$(PY) bench/bench_gpu_sync.py
	$(PY) bench/bench_gpu_pack.py
	$(PY) bench/bench_gpu_share.py
	$(PY) bench/bench_gpu_sweep.py
	PYTHON=$(PY) bash bench/gpu_smoke.sh reports/gpu-smoke

# Single-node SLURM (root; Debian packages; no systemd) for tests/test_slurm.py and local sweeps.
slurm:
	bash scripts/slurm-up.sh

clean:
	rm -rf $(VENV) results outputs multirun
