"""Write the training inputs of the example: ascending and descending files of integers.

    python3 make_train.py [N]     # train/ascending-{0,1,2}.txt and train/descending-{0,1,2}.txt
"""

from __future__ import annotations

import random
import sys
from pathlib import Path


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    out = Path(__file__).resolve().parent / "train"
    out.mkdir(exist_ok=True)
    rng = random.Random(0)
    for i in range(3):
        xs = sorted(rng.randrange(10**6) for _ in range(n))
        (out / f"ascending-{i}.txt").write_text("\n".join(map(str, xs)) + "\n", encoding="utf-8")
        (out / f"descending-{i}.txt").write_text("\n".join(map(str, xs[::-1])) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
