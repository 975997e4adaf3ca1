#!/usr/bin/env bash
# A GPU smoke run on the lent GPU machine (benchmarks/results/gpu-smoke.md), from a copy of this tree at the
# repository root there: the Triton softmax example and the gpu-marked tests under tests/triton and
# tests/torchc but the max-autotune compile (400 s); the others run in CI (all of them here took more than
# the 10 minutes a device call may take).
# python3 there has torch and Triton; SQLAlchemy and greenlet travel as wheels in .whl/ (carry it).
# Writes ${OUT:-.}/gpu-smoke.log.
set -uo pipefail
out=${OUT:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
{
  date -u
  python3 -c "import torch, triton, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,clocks.current.memory,power.draw,power.limit,temperature.gpu --format=csv
  echo "## softmax example"
  python3 -m perftune.examples.gpu.triton_softmax 4096 8192; echo "rc=$?"
  echo "## the gpu-marked tests of tests/triton and tests/torchc"
  timeout 420 python3 -m pytest tests/triton tests/torchc -m gpu -v -p no:cacheprovider \
      -k "not test_tune_compile_on_cuda" 2>&1 | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|Error" | tail -40
  echo "rc=${PIPESTATUS[0]}"
  nvidia-smi --query-gpu=name,driver_version,clocks.current.sm,clocks.current.memory,power.draw,power.limit,temperature.gpu --format=csv
  date -u
} 2>&1 | tee "$out/gpu-smoke.log"
