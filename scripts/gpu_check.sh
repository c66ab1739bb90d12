#!/usr/bin/env bash
# The accelerator check (issue 32), one run on a GPU machine; its parts' limits add up to under 8 minutes (460 s):
#
#   bash scripts/gpu_check.sh                 # on the GPU machine; results in $OUT (default ./gpu-check-out)
#   GPU_CHECK_TINY=1 bash scripts/gpu_check.sh    # rehearsal on a CPU: CUDA tests skip, tiny sizes
#
# Parts, each with its own time limit; one failing part never stops the others, and the
# summary is always written:
#   setup    pydantic & co. from carried wheels (.whl/, when the image lacks them); overt from
#            this working tree over the torch already installed (editable install, no
#            dependencies; else PYTHONPATH); versions and nvidia-smi       -> env.txt
#   tests    tests/cuda (fp16/bf16, compile, activation checkpointing, exact resume, pinned
#            memory, host syncs under sync debug mode)                     -> cuda_tests.xml
#   speed    benchmarks/gpu_speed.py (hand loops, overt, Lightning on the gpt recipe)
#                                                                          -> gpu_speed.json, gpu_speed.md
#   doctor   overt doctor digits --bench (parity probe, device benchmark)  -> doctor_digits.md
#   parity   overt doctor on a small gpt (parity on a transformer)         -> doctor_gpt.md
# Always: gpu_check.log (everything printed) and summary.md (each part's status and time,
# the figures to look at).  8 files in all, no folders.
#
# Data: Tiny Shakespeare from $OVERT_GPT_TEXT, ../shared/data/tinyshakespeare/input.txt or
# .gpudata/tinyshakespeare/input.txt (carry that folder to a machine that has no ../shared).
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
TINY=${GPU_CHECK_TINY:-0}
LOG=$OUT/gpu_check.log
SUMMARY=$OUT/summary.md
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
: > "$LOG"
T0=$(date +%s)
STATUS=()

note() { echo "== $* ==" | tee -a "$LOG"; }

# part NAME LIMIT_S COMMAND...: run with a time limit, output into the log; record status and time
part() {
    local name=$1 limit=$2
    shift 2
    local start rc
    start=$(date +%s)
    note "$name (limit ${limit}s)"
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    rc=$?
    local took=$(( $(date +%s) - start ))
    local verdict=ok
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then verdict="TIMED OUT"; elif [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; fi
    STATUS+=("| $name | $verdict | ${took} s | ${limit} s |")
    note "$name: $verdict in ${took}s"
    return 0
}

write_summary() {
    {
        echo "# GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(( $(date +%s) - T0 )) s in all, tiny=$TINY)"
        echo
        echo "| part | status | took | limit |"
        echo "|---|---|---|---|"
        printf '%s\n' "${STATUS[@]}"
        echo
        echo "## Environment"
        echo '```'
        head -n 40 "$OUT/env.txt" 2>/dev/null
        echo '```'
        echo
        echo "## CUDA tests"
        echo '```'
        grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|error|skipped|^(fp32|bf16|fp16|overt\.guard|overt run|compile|activation)" \
            "$WORK/tests.txt" 2>/dev/null | tail -n 60
        echo '```'
        echo
        echo "## Speed (benchmarks/gpu_speed.py)"
        cat "$OUT/gpu_speed.md" 2>/dev/null || echo "(no result)"
        echo
        echo "## Doctor"
        echo '```'
        for name in digits gpt; do
            echo "-- overt doctor $name --bench"
            grep -hE "doctor \[|overt doctor:" "$WORK/doctor_$name.txt" 2>/dev/null
        done
        echo '```'
    } > "$SUMMARY"
}
trap write_summary EXIT

# -- setup --------------------------------------------------------------------------------------------
setup() {
    if ! "$PY" -c "import pydantic" 2>/dev/null; then
        if ls .whl/*.whl >/dev/null 2>&1; then
            "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/overt-site .whl/*.whl \
                || return 1
            echo "installed from .whl/: $(ls .whl | tr '\n' ' ')"
        else
            echo "pydantic is missing and no wheels are carried in .whl/"; return 1
        fi
    fi
    return 0
}
part setup-wheels 15 bash -c "$(declare -f setup); PY='$PY' setup"
[ -d /tmp/overt-site ] && export PYTHONPATH=/tmp/overt-site${PYTHONPATH:+:$PYTHONPATH}
if [ "$TINY" != 1 ] && [ "${GPU_CHECK_INSTALL:-1}" = 1 ]; then
    # an editable install registers overt's entry points (the `overt` command, the pytest plugin)
    part setup-install 20 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e .
fi
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}

for candidate in "${OVERT_GPT_TEXT:-}" "$ROOT/../shared/data/tinyshakespeare/input.txt" "$ROOT/.gpudata/tinyshakespeare/input.txt"; do
    if [ -n "$candidate" ] && [ -f "$candidate" ]; then export OVERT_GPT_TEXT=$candidate; break; fi
done
echo "text: ${OVERT_GPT_TEXT:-not found}" | tee -a "$LOG"

environment() {
    echo "date: $(date -u)"
    echo "host: $(uname -a)"
    "$PY" - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, f"{p.total_memory / 2**30:.1f} GiB", "sm", f"{p.major}.{p.minor}",
          "multiprocessors", p.multi_processor_count, "bf16", torch.cuda.is_bf16_supported())
for name in ("overt", "pydantic", "pydantic_core", "typing_extensions", "lightning", "numpy", "safetensors",
             "tensorboard", "rich", "yaml", "sklearn", "pathspec", "triton", "pytest"):
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, "__version__", "?"), getattr(m, "__file__", ""))
    except Exception as exc:
        print(name, "MISSING:", type(exc).__name__, exc)
from importlib.metadata import entry_points
print("pytest11 entry points:", [e.value for e in entry_points(group="pytest11")])
EOF
    nvidia-smi 2>&1 || echo "(no nvidia-smi)"
}
part environment 30 bash -c "$(declare -f environment); PY='$PY' environment > '$OUT/env.txt' 2>&1; rc=\$?; cat '$OUT/env.txt'; exit \$rc"

# -- the doctor first (short), then the tests, the speed, the second doctor ------------------------------
doctor() {  # NAME ARGS...: overt doctor with --bench, its note copied to $OUT/doctor_NAME.md
    local name=$1
    shift
    "$PY" -m overt doctor "$@" --bench "out=$WORK/doctor-$name" "runs_root=$WORK/runs" > "$WORK/doctor_$name.txt" 2>&1
    local rc=$?
    cat "$WORK/doctor_$name.txt"
    cp "$WORK/doctor-$name/readiness.md" "$OUT/doctor_$name.md" 2>/dev/null
    return $rc
}
part doctor-digits 30 bash -c "$(declare -f doctor); PY='$PY' WORK='$WORK' OUT='$OUT' doctor digits digits"

TIMEOUT_OPT=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TIMEOUT_OPT=(--timeout=100)
cuda_tests() {
    # the doctor's parity probe runs in its own part below: its test is left out here
    "$PY" -m pytest tests/cuda -v -rs -s -p no:cacheprovider --junitxml="$OUT/cuda_tests.xml" \
        --basetemp="$WORK/pytest" -k "not doctor_parity" "$@" 2>&1 | tee "$WORK/tests.txt"
}
part cuda-tests "${GPU_CHECK_TESTS_S:-190}" bash -c "$(declare -f cuda_tests); PY='$PY' OUT='$OUT' WORK='$WORK' cuda_tests ${TIMEOUT_OPT[*]:-}"

if [ "$TINY" = 1 ]; then
    SPEED=(--tiny --repeats 1)
else
    SPEED=(--repeats "${GPU_CHECK_REPEATS:-2}" --steps 30 --warmup 8)
fi
part speed "${GPU_CHECK_SPEED_S:-140}" "$PY" benchmarks/gpu_speed.py "${SPEED[@]}" --json "$OUT/gpu_speed.json" --md "$OUT/gpu_speed.md"

if [ "$TINY" = 1 ]; then GPT_SIZE="layers=1 heads=2 embed=32 context=32 limit_chars=20000"; else
    GPT_SIZE="layers=2 heads=4 embed=128 context=128 limit_chars=100000"; fi
if [ -n "${OVERT_GPT_TEXT:-}" ]; then
    part doctor-gpt 35 bash -c "$(declare -f doctor); PY='$PY' WORK='$WORK' OUT='$OUT' doctor gpt gpt text='$OVERT_GPT_TEXT' \
        $GPT_SIZE batch_size=32 ignore=[effective-batch-size]"
else
    STATUS+=("| doctor-gpt | SKIPPED (no Tiny Shakespeare) | 0 s | 45 s |")
fi
note "done in $(( $(date +%s) - T0 ))s; results in $OUT"
