"""Features of an input file for the dispatcher: prints one JSON object of numbers.

    python3 features.py INPUT     # {"log_size": ..., "sortedness": ...}

Cheap on purpose: the dispatcher pays for every feature it reads (``perftune adapt`` times this command
on every training input and counts it against what the right sort saves), so the file is not parsed:
its lines are counted, and only the first 257 are read as numbers.
"""

from __future__ import annotations

import json
import math
import sys

HEAD = 257  # lines read as numbers: 256 neighbouring pairs


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    n = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)  # lines, without parsing them
    head = [int(line) for line in data.split(b"\n", HEAD)[:HEAD] if line.strip()]
    pairs = list(zip(head, head[1:], strict=False))
    up = sum(1 for a, b in pairs if a <= b)
    print(json.dumps({"log_size": math.log2(n + 1), "sortedness": up / len(pairs) if pairs else 1.0}))


if __name__ == "__main__":
    main()
