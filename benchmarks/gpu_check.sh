#!/usr/bin/env bash
# The prepared GPU check (issue 21, item 6): everything a session lent one CUDA GPU for a few
# minutes should measure, in one command that ends inside 9 minutes (GPU_CHECK_SECONDS, default 540).
#
#   benchmarks/gpu_check.sh DATA_DIR OUT_DIR
#
# DATA_DIR: the lenet++ sets unpacked into DATA_DIR (NAME/NAME.npz for mnist, letters, nhcd or
#   devanagari, notmnist, cifar10, as `agnostophobia data fetch` lays them out). A packed bundle of
#   xz-compressed sets (NAME.npz.xz files, perhaps with a CUT.txt naming cut splits) is unpacked by
#   this script into OUT_DIR/data (NAME.npz.xz -> NAME/NAME.npz) and CUT.txt copied to
#   OUT_DIR/data-cuts.txt; any other archive (.tar, .zip) is unpacked into DATA_DIR first by hand.
# OUT_DIR: logs, metrics and reports go here; run the script again with the same OUT_DIR to
#   continue a reproduction the time limit cut (each run resumes from its last finished epoch).
#
# Needs only this working tree, the data and a Python with torch >= 2.11 (PYTHON, default
# python3): no internet, no pip, no make. The code runs from source (PYTHONPATH=src). Stages, each
# cut by `timeout` so that the whole ends in time:
#   1. the machine: nvidia-smi, Python/torch/torchvision/numpy versions, the commit (or, outside a
#      git checkout, a hash of the source files)                    -> OUT_DIR/environment.txt
#   2. the CUDA tests (pytest -m cuda, the files that hold them)      -> OUT_DIR/cuda-tests.log
#   3. benchmarks/bench_gpu.py                                        -> OUT_DIR/bench_gpu.log
#   4. the rule under which batched_seeds: auto may turn on with CUDA: reproduce lenet++ --budget
#      cpu --seeds 5 batched and separately, then benchmarks/compare_batched_ccr.py (batched CCR at
#      1e-2 and 1e-1 within the separate seeds' mean +- max(2 std, 0.01) in >= 90 % of cells)
#                    -> OUT_DIR/batched-ccr.log, OUT_DIR/runs/cpu-{batched,separate}/
#   5. benchmarks/compare_batched_seeds.py: 5 seeds of objectosphere with the paper budget for 2
#      epochs on the real data, trained separately and then batched (batched_seeds)
#                                                                     -> OUT_DIR/batched-seeds.log
#   6. reproduce lenet++ --budget paper --seeds 5 --preprocessing authors, then ours as time allows
#                                  -> OUT_DIR/reproduce-{authors,ours}.log, OUT_DIR/runs/paper-{authors,ours}/
#      with --cuda-graph when GPU_CHECK_CUDA_GRAPH is on, or (auto, the default) when every test of
#      tests/training/test_cuda_graph.py passed in 2. and bench_gpu.py found one run's captured step at least
#      1.1x as fast as its eager step; the summary says which, and why. A resumed check keeps the
#      first choice (OUT_DIR/cuda-graph.txt).
# A summary of each stage's exit status and seconds goes to OUT_DIR/summary.txt, and every text result
# (logs, summaries, metrics, reports; no checkpoints or data) to OUT_DIR/results.tar.gz.
# Without a CUDA device it prints "no CUDA device" and exits 0.
set -u

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

if [ $# -ne 2 ]; then
    usage >&2
    exit 2
fi
DATA_DIR=$1
OUT_DIR=$2
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
TOTAL=${GPU_CHECK_SECONDS:-540}
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg
START=$SECONDS

# one Python start (torch takes seconds to import): a missing or old torch, or no CUDA device
TORCH_STATE=$("$PY" -c "
import sys
try:
    import torch
except ImportError:
    sys.exit('missing')
version = tuple(int(part) for part in torch.__version__.split('+')[0].split('.')[:2])
print(('cuda' if torch.cuda.is_available() else 'nocuda') if version >= (2, 11) else 'old ' + torch.__version__)
" 2>&1)
case "$TORCH_STATE" in
    cuda) ;;
    nocuda) echo "no CUDA device"; exit 0 ;;
    missing|"") echo "gpu_check: $PY cannot import torch; set PYTHON to a Python with torch >= 2.11" >&2; exit 1 ;;
    *) echo "gpu_check: $PY: torch >= 2.11 needed, found: $TORCH_STATE" >&2; exit 1 ;;
esac
if [ ! -d "$DATA_DIR" ]; then
    echo "gpu_check: DATA_DIR $DATA_DIR is not a directory" >&2
    exit 2
fi
if [ ! -d "$DATA_DIR/mnist" ] && ls "$DATA_DIR" | grep -Eq '\.(tar|tar\.gz|tgz|tar\.xz|tar\.zst|zip)$'; then
    echo "gpu_check: $DATA_DIR holds an archive, not the sets: unpack the lenet++ sets into DATA_DIR first" \
         "(e.g. tar -xf $DATA_DIR/ARCHIVE -C $DATA_DIR)" >&2
    exit 2
fi
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
DATA_DIR=$(cd "$DATA_DIR" && pwd)
cd "$REPO" || exit 2
SUMMARY="$OUT_DIR/summary.txt"
echo "=== gpu_check $(date -u +%FT%TZ), limit ${TOTAL}s" >> "$SUMMARY"

# a bundle of xz-compressed sets: unpacked into OUT_DIR/data (once; DATA_DIR is only read)
if compgen -G "$DATA_DIR/*.npz.xz" > /dev/null; then
    "$PY" - "$DATA_DIR" "$OUT_DIR/data" <<'EOF' || { echo "gpu_check: cannot unpack $DATA_DIR" >&2; exit 2; }
import lzma, sys
from pathlib import Path
source, target = Path(sys.argv[1]), Path(sys.argv[2])
for packed in sorted(source.glob("*.npz.xz")):
    name = packed.name[:-len(".npz.xz")]
    out = target / name / f"{name}.npz"
    if not (out.exists() and out.stat().st_size):
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_suffix(".part")
        part.write_bytes(lzma.decompress(packed.read_bytes()))
        part.rename(out)
    print(f"unpacked {packed.name} -> {out}")
EOF
    if [ -f "$DATA_DIR/CUT.txt" ]; then
        cp "$DATA_DIR/CUT.txt" "$OUT_DIR/data-cuts.txt"
    fi
    DATA_DIR="$OUT_DIR/data"
    echo "data: unpacked into $DATA_DIR; cuts: $(tr '\n' ';' < "$OUT_DIR/data-cuts.txt" 2>/dev/null)" | tee -a "$SUMMARY"
fi

left() { echo $((TOTAL - (SECONDS - START))); }

# stage NAME LIMIT LOG COMMAND...: runs COMMAND under `timeout` for at most LIMIT seconds (and never
# past the total), appending its output to LOG and a line to the summary.
stage() {
    local name=$1 limit=$2 log=$3
    shift 3
    local budget
    budget=$(left)
    [ "$limit" -lt "$budget" ] || limit=$((budget - 5))
    if [ "$limit" -lt 30 ]; then
        echo "$name: skipped, ${budget}s left" | tee -a "$SUMMARY"
        return 0
    fi
    echo "=== $(date -u +%FT%TZ) $name, at most ${limit}s: $*" >> "$log"
    local began=$SECONDS
    timeout --kill-after=15 "$limit" "$@" >> "$log" 2>&1
    local status=$?
    local note=""
    if [ $status -eq 124 ] || [ $status -eq 137 ]; then
        note=" (cut by the time limit)"
    fi
    echo "$name: exit $status$note, $((SECONDS - began))s" | tee -a "$SUMMARY"
    return $status
}

# 1. the machine and the code
{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(hostname)"
    if git -C "$REPO" rev-parse HEAD >/dev/null 2>&1; then
        echo "commit: $(git -C "$REPO" rev-parse HEAD)"
        echo "uncommitted changes: $(git -C "$REPO" status --porcelain | wc -l) paths"
    else
        echo "commit: unknown (not a git checkout); sha256 of src/**/*.py: $(cd "$REPO" && find src -name '*.py' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
    fi
    "$PY" - <<'EOF'
import platform, numpy, torch
try:
    import torchvision
    vision = torchvision.__version__
except ImportError:
    vision = "not installed"
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"torchvision {vision}, numpy {numpy.__version__}")
print(f"device: {torch.cuda.get_device_name()}, {torch.cuda.device_count()} visible")
EOF
    echo "--- nvidia-smi"
    nvidia-smi 2>&1 || echo "nvidia-smi not found"
} > "$OUT_DIR/environment.txt" 2>&1
echo "environment: $(sed -n 's/^python /python /p' "$OUT_DIR/environment.txt")" | tee -a "$SUMMARY"

# 2. the CUDA tests (only the files that hold them: the others may need packages this machine lacks)
if "$PY" -c "import pytest" 2>/dev/null; then
    mapfile -t CUDA_TESTS < <(grep -rl --include="test_*.py" "mark.cuda" tests)
    stage "cuda tests" 180 "$OUT_DIR/cuda-tests.log" "$PY" -m pytest -m cuda -q -p no:cacheprovider \
        --junitxml="$OUT_DIR/cuda-tests.xml" "${CUDA_TESTS[@]}"
else
    echo "cuda tests: skipped, pytest is not installed for $PY" | tee -a "$SUMMARY"
fi

# 3. the GPU benchmark
stage "bench_gpu" 180 "$OUT_DIR/bench_gpu.log" "$PY" benchmarks/bench_gpu.py --samples 32768

# 4. batched against separate seeds at the cpu budget: the default's rule (see the header)
for way in batched separate; do
    flag=$([ "$way" = batched ] && echo true || echo false)
    stage "cpu budget, 5 seeds, batched_seeds $flag" 240 "$OUT_DIR/batched-ccr.log" \
        "$PY" -m agnostophobia reproduce lenet++ --budget cpu --seeds 5 --batched-seeds "$flag" --no-plots \
        --data-dir "$DATA_DIR" --out "$OUT_DIR/runs/cpu-$way" --no-fetch --no-progress || break
done
if [ -f "$OUT_DIR/runs/cpu-separate/metrics.json" ] && [ -f "$OUT_DIR/runs/cpu-batched/metrics.json" ]; then
    "$PY" benchmarks/compare_batched_ccr.py "$OUT_DIR/runs/cpu-batched" "$OUT_DIR/runs/cpu-separate" \
        >> "$OUT_DIR/batched-ccr.log" 2>&1
    echo "batched CCR against separate: $(grep -E '^(cells|agree):' "$OUT_DIR/batched-ccr.log" | tr '\n' ' ')" \
        | tee -a "$SUMMARY"
fi

# 5. the seeds of one approach trained separately and batched, on the real data
stage "batched seeds" 170 "$OUT_DIR/batched-seeds.log" "$PY" benchmarks/compare_batched_seeds.py \
    --data-dir "$DATA_DIR" --seeds 5 --epochs 2 --out "$OUT_DIR/runs/batched-seeds"

# whether the reproduction replays each step from a CUDA graph (see the header)
GRAPH_CHOICE="$OUT_DIR/cuda-graph.txt"
if [ ! -f "$GRAPH_CHOICE" ]; then
    case "${GPU_CHECK_CUDA_GRAPH:-auto}" in
        on) echo "on (GPU_CHECK_CUDA_GRAPH=on)" > "$GRAPH_CHOICE" ;;
        off) echo "off (GPU_CHECK_CUDA_GRAPH=off)" > "$GRAPH_CHOICE" ;;
        *) "$PY" - "$OUT_DIR/cuda-tests.xml" "$OUT_DIR/bench_gpu.log" > "$GRAPH_CHOICE" <<'EOF'
import re, sys
import xml.etree.ElementTree as ET
try:
    cases = [case for case in ET.parse(sys.argv[1]).iter("testcase") if "test_cuda_graph" in case.get("classname", "")]
except (OSError, ET.ParseError):
    cases = []
failed = [case.get("name") for case in cases if case.find("failure") is not None or case.find("error") is not None
          or case.find("skipped") is not None]
try:
    ratios = re.findall(r"x([0-9.]+) the one run \(cuda_graph: true\)", open(sys.argv[2]).read())
except OSError:
    ratios = []
if not cases or failed:
    print(f"off (CUDA graph tests: {len(cases)} ran, not passed: {failed[:3]})")
elif not ratios or float(ratios[-1]) < 1.1:
    print(f"off (bench_gpu: captured/eager one run = {ratios[-1] if ratios else 'not measured'})")
else:
    print(f"on ({len(cases)} CUDA graph tests passed; bench_gpu: captured/eager one run = x{ratios[-1]})")
EOF
        ;;
    esac
fi
GRAPH_FLAG=()
if grep -q '^on' "$GRAPH_CHOICE"; then
    GRAPH_FLAG=(--cuda-graph)
fi
echo "cuda_graph for the reproduction: $(cat "$GRAPH_CHOICE")" | tee -a "$SUMMARY"

# 6. the paper's protocol, 5 seeds: the authors' preparation, then ours with what time is left
for prep in authors ours; do
    log="$OUT_DIR/reproduce-$prep.log"
    stage "reproduce paper --seeds 5 --preprocessing $prep" $(( $(left) - 10 )) "$log" \
        "$PY" -m agnostophobia reproduce lenet++ --budget paper --seeds 5 --preprocessing "$prep" \
        --data-dir "$DATA_DIR" --out "$OUT_DIR/runs/paper-$prep" --no-fetch --no-progress "${GRAPH_FLAG[@]}"
    status=$?
    if [ $status -eq 124 ] || [ $status -eq 137 ]; then
        echo "cut by the time limit: the runs keep their finished epochs; run the same command (or this script" \
             "with the same OUT_DIR) again to resume" | tee -a "$log" "$SUMMARY"
        break
    fi
done
echo "total: $((SECONDS - START))s; logs, metrics and reports in $OUT_DIR" | tee -a "$SUMMARY"
# the text results alone in one small archive (the run folders' checkpoints and the unpacked data are
# hundreds of MB): what to copy off a machine lent for minutes
(cd "$OUT_DIR" && find . -path ./data -prune -o -type f \( -name '*.log' -o -name '*.txt' -o -name '*.xml' \
    -o -name '*.json' -o -name '*.md' -o -name '*.csv' \) -print0 | tar czf results.tar.gz --null -T -) \
    && echo "text results: $OUT_DIR/results.tar.gz ($(du -k "$OUT_DIR/results.tar.gz" | cut -f1) KiB)"
