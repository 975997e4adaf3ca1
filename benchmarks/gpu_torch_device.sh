#!/usr/bin/env bash
# The torch.compile and placement GPU runs, as one command on the device machine (see docs/gpu.md).
# Run from the root of the copy the device tool sends, with this worktree's files in $GPUDIR and the
# SQLAlchemy wheel (which the device image lacks) in .whl:
#   bash .gpu-torchc/benchmarks/gpu_torch_device.sh smoke   # GPU tests, a few minutes at most
#   bash .gpu-torchc/benchmarks/gpu_torch_device.sh full    # both benchmarks, results under $OUT
#   bash .gpu-torchc/benchmarks/gpu_torch_device.sh compile # gpu_compile.py only (MODELS, BUDGET, SEARCH_S,
#                                                           # WORKERS, PROCESS_TIMEOUT_S, COMPILE_TIMEOUT_S)
set -uo pipefail
mode=${1:-smoke}
gpudir=${GPUDIR:-.gpu-torchc}
out=${OUT:-/tmp/perftune-gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
cd "$gpudir" || exit 1
export PYTHONPATH=$PWD/src:/tmp/site:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$out/card-before.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
case "$mode" in
  smoke)
    timeout 300 python3 -m pytest tests/torchc -m gpu -q -p no:cacheprovider -x 2>&1 | tee "$out/smoke.txt"
    ;;
  full|compile)
    if [ "$mode" = full ]; then
      timeout "${PLACEMENT_TIMEOUT_S:-60}" python3 benchmarks/gpu_placement.py --out "$out" --rounds 5 2>&1 \
        | tee "$out/placement-log.txt"
    fi
    timeout "${COMPILE_TIMEOUT_S:-330}" python3 benchmarks/gpu_compile.py --out "$out" \
      --models "${MODELS:-mlp,transformer,resnet18}" --budget "${BUDGET:-8}" --seconds "${SEARCH_S:-50}" \
      --timeout "${PROCESS_TIMEOUT_S:-90}" --workers "${WORKERS:-1}" 2>&1 | tee "$out/compile-log.txt"
    ;;
  *) echo "unknown mode $mode (smoke, full or compile)"; exit 2 ;;
esac
status=$?
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$out/card-after.txt"
exit $status
