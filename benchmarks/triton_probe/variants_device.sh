#!/usr/bin/env bash
# Which difference between the probe's run (passes) and the smoke run (fails) matters: pytest's output
# capture (-s), the probe's imports at process start, the energy test run first. Carry .whl.
set -uo pipefail
out=${OUT:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
T="tests/triton/test_triton_gpu.py -m gpu -k faulting -q -p no:cacheprovider"
{
  date -u
  echo "## A: no probe, captured"
  PYTHONPATH=$PWD/src:/tmp/site timeout 100 python3 -m pytest $T 2>&1 | tail -5
  echo "## B: no probe, -s"
  PYTHONPATH=$PWD/src:/tmp/site timeout 100 python3 -m pytest $T -s 2>&1 | tail -5
  echo "## C: probe, captured"
  PYTHONPATH=$PWD/benchmarks/triton_probe:$PWD/src:/tmp/site timeout 100 python3 -m pytest $T 2>&1 | grep -v "^\[W" | tail -60
  echo "## D: energy test, probe, -s"
  PYTHONPATH=$PWD/benchmarks/triton_probe:$PWD/src:/tmp/site timeout 150 python3 -m pytest tests/triton/test_energy.py -m gpu -q -s -p no:cacheprovider 2>&1 | grep -v "^\[W" | tail -60
  date -u
} > "$out/variants.log" 2>&1
tail -c 11500 "$out/variants.log"
