#!/usr/bin/env bash
# The steps behind benchmarks/results/gpu-matmul.md, on the lent GPU machine, from a copy of this tree
# at the repository root there (python3 has torch and Triton; SQLAlchemy travels as a wheel in .whl/,
# as the device tool's README says). Writes into ${OUT:-.}; about 9 minutes on an H200.
set -euo pipefail
out=${OUT:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:$PWD/tests/triton:/tmp/site PYTHONUNBUFFERED=1
# The failure test (a wrong result, an illegal address, a hang) with its reasons printed.
python3 -m pytest tests/triton/test_triton_gpu.py -m gpu -q -p no:cacheprovider -s -o filterwarnings=ignore \
  -o addopts="" | tee "$out/gpu-tests.txt"
# Exhaustive over the 926 configurations on 4096^3 and 16x8192x8192, triton.autotune on 20 of them.
python3 benchmarks/gpu_matmul.py exhaustive --out "$out/exhaustive.jsonl" --exhaustive 1 4 --triton-sample 20
# All nine shapes: cuBLAS, perftune (default budget), torch.compile max-autotune, sustained, the cache.
python3 benchmarks/gpu_matmul.py tune --out "$out/tune.jsonl" --heat-s 1.5
