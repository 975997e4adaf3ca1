"""Features of an input file for the dispatcher: prints one JSON object of numbers.

    python3 features.py INPUT     # {"log_size": ..., "sortedness": ...}
"""

from __future__ import annotations

import json
import math
import sys


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        xs = [int(line) for line in f if line.strip()]
    head = xs[:256]
    pairs = list(zip(head, head[1:], strict=False))
    up = sum(1 for a, b in pairs if a <= b)
    print(json.dumps({"log_size": math.log2(len(xs) + 1), "sortedness": up / len(pairs) if pairs else 1.0}))


if __name__ == "__main__":
    main()
