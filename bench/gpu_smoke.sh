#!/usr/bin/env bash
# The trainer's CUDA paths end to end on one GPU: what CI (CPU only) cannot run.
#
#   bash bench/gpu_smoke.sh [OUTDIR]     # ~3 min on an H100; OUTDIR gets the logs, fit, figures and report
#
# 1. one run in bf16 autocast (precision auto on CUDA), eager      -> completes, record says cuda
# 2. one run under torch.compile                                   -> completes, same loss range
# 3. SIGTERM mid-run, relaunch                                     -> exits 143 with a checkpoint, resumes, completes
# 4. the quick sweep on the GPU (basic launcher), fit, plot, report
# Uses `$PYTHON -m scaling.cli` ($PYTHON: python3 unless set; make bench-gpu sets the venv's), so it
# also runs from a checkout without an install (PYTHONPATH=checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu-smoke}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" SCALING_CACHE=${SCALING_CACHE:-/tmp/scaling-cache}
S=$(mktemp -d)
scaling() { "$PY" -m scaling.cli "$@"; }
record_of() { "$PY" - "$1" <<'EOF'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("runs/*/record.json")):
    r = json.loads(p.read_text())
    print(f"  record: {r['status']} {r.get('reason', '')} device={r['device']} val_loss={r['val_loss']:.4f} "
          f"tokens/s={r['tokens_per_s']:,.0f} wall={r['wall_time_s']:.1f}s")
EOF
}

nvidia-smi -L
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

echo "== 1. eager bf16 run (d256, 3e14 FLOPs)"
"$PY" -m scaling.cli train model=d256 budget=3e14 tracking=none store=$S/eager 2>&1 | tail -4
record_of $S/eager

echo "== 2. compiled run (d256, 3e14 FLOPs, train.compile=true)"
"$PY" -m scaling.cli train model=d256 budget=3e14 tracking=none train.compile=true store=$S/compiled 2>&1 | tail -4
record_of $S/compiled

echo "== 3. SIGTERM mid-run, then relaunch (d384, 1e15 FLOPs)"
"$PY" -m scaling.cli train model=d384 budget=1e15 tracking=none store=$S/kill > $OUT/kill1.log 2>&1 &
pid=$!
for _ in $(seq 120); do grep -q "step " $OUT/kill1.log 2>/dev/null && break; sleep 0.5; done
sleep 3; kill -TERM $pid; set +e; wait $pid; echo "  first launch exit code $? (143 = preempted, checkpoint saved)"; set -e
tail -2 $OUT/kill1.log
"$PY" -m scaling.cli train model=d384 budget=1e15 tracking=none store=$S/kill > $OUT/kill2.log 2>&1
grep -i -m2 "resum" $OUT/kill2.log || true
tail -2 $OUT/kill2.log
record_of $S/kill

echo "== 4. quick sweep on the GPU, fit, figures, report"
"$PY" -m scaling.cli sweep quick tracking=none store=$S/quick > $OUT/sweep.log 2>&1
tail -3 $OUT/sweep.log
scaling status $S/quick | tail -5
scaling fit $S/quick --approach all --bootstrap 1000 --out $OUT/fit.json | tail -25
scaling optimal --budget 1e15 --law $OUT/fit.json
scaling plot $S/quick --fit $OUT/fit.json --out $OUT
scaling report $S/quick --fit $OUT/fit.json --out $OUT/report.html
ls $OUT
