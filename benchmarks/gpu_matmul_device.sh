#!/usr/bin/env bash
# The steps behind benchmarks/results/gpu-matmul.md, on the lent GPU machine, from a copy of this tree
# at the repository root there (python3 has torch and Triton; SQLAlchemy travels as a wheel in .whl/,
# as the device tool's README says). Writes into ${OUT:-.}.
#   bash benchmarks/gpu_matmul_device.sh tests        # the failure test (wrong result, illegal address, hang)
#   bash benchmarks/gpu_matmul_device.sh exhaustive   # all 926 configs on SHAPES (default "1 4 5 7"), ~5 min
#   bash benchmarks/gpu_matmul_device.sh tune         # all nine shapes, cuBLAS, max-autotune, the cache, ~6 min
#   bash benchmarks/gpu_matmul_device.sh energy       # time against energy (NVML): its GPU test, then 8192^3, ~3 min
set -euo pipefail
out=${OUT:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:$PWD/tests/triton:/tmp/site PYTHONUNBUFFERED=1
card() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu \
    --format=csv,noheader | sed "s/^/$(date -u +%H:%M:%S) /" | tee -a "$out/card.txt"
}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests exhaustive tune)
card
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      python3 -m pytest tests/triton/test_triton_gpu.py -m gpu -q -p no:cacheprovider -s -o filterwarnings=ignore \
        -o addopts="" | tee "$out/gpu-tests.txt" ;;
    exhaustive)
      # shellcheck disable=SC2086
      python3 benchmarks/gpu_matmul.py exhaustive --out "$out/exhaustive.jsonl" --exhaustive ${SHAPES:-1 4 5 7} \
        --triton-sample "${TRITON_SAMPLE:-8}" ;;
    tune)
      python3 benchmarks/gpu_matmul.py tune --out "$out/tune.jsonl" --heat-s 1.5 ;;
    energy)
      python3 -m pytest tests/triton/test_energy.py -m gpu -q -p no:cacheprovider -s -o filterwarnings=ignore \
        -o addopts="" | tee "$out/energy-tests.txt"
      # shellcheck disable=SC2086
      python3 -m perftune.examples.gpu.matmul_energy ${ENERGY_SHAPE:-8192 8192 8192} --budget "${ENERGY_BUDGET:-40}" \
        --out "$out/energy.json" | tee "$out/energy.txt" ;;
    *) echo "unknown step $step (tests, exhaustive, tune or energy)"; exit 2 ;;
  esac
  card
done
