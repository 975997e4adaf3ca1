#!/usr/bin/env bash
# The probe's device call (benchmarks/results/gpu-smoke.md): the faulting/hanging test with the timeline,
# with and without compile workers. Carry .whl (SQLAlchemy, greenlet). Writes ${OUT:-.}/probe.log.
set -uo pipefail
out=${OUT:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/benchmarks/triton_probe:$PWD/src:/tmp/site PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,compute_mode,clocks.current.sm,power.draw --format=csv
  nproc
  echo "## with compile workers"
  timeout 110 python3 -m pytest tests/triton/test_triton_gpu.py -m gpu -k faulting -s -q -p no:cacheprovider 2>&1 | tail -80
  echo "## PROBE_POOL0=1"
  PROBE_POOL0=1 timeout 90 python3 -m pytest tests/triton/test_triton_gpu.py -m gpu -k faulting -s -q -p no:cacheprovider 2>&1 | tail -60
  date -u
} > "$out/probe.log" 2>&1
tail -c 11000 "$out/probe.log"
