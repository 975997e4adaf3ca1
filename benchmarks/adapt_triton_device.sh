#!/usr/bin/env bash
# benchmarks/results/adapt-triton.md on the lent GPU machine, from a copy of this tree at the repository
# root there (python3 has torch, Triton and scikit-learn; SQLAlchemy and greenlet travel as wheels in .whl/,
# as the device tool's README says). Writes ${OUT:-.}/adapt-triton.json and the report beside it.
set -euo pipefail
out=${OUT:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
python3 benchmarks/adapt_triton.py run --out "$out/adapt-triton.json" "$@" 2>&1 | tee "$out/adapt-triton.log"
python3 benchmarks/adapt_triton.py report "$out/adapt-triton.json" > "$out/adapt-triton.md"
