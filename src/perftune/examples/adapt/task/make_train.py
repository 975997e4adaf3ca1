"""Write the training inputs of the example: ascending, descending and shuffled files of integers.

    python3 make_train.py [N]     # train/{ascending,descending,shuffled}-{0,1,2}.txt, N integers each

Long enough by default (300000 lines) that the right sort saves several times what the feature command
costs (a Python start-up: tens of milliseconds, about 100 through a pyenv shim). On files of a few
thousand lines it saves less than that, and the learner rightly reads no feature and runs merge sort on
every input. The shuffled files teach it where neither insertion sort is linear.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300000
    out = Path(__file__).resolve().parent / "train"
    out.mkdir(exist_ok=True)
    rng = random.Random(0)
    for i in range(3):
        xs = sorted(rng.randrange(10**6) for _ in range(n))
        shuffled = list(xs)
        rng.shuffle(shuffled)
        for name, ys in (("ascending", xs), ("descending", xs[::-1]), ("shuffled", shuffled)):
            (out / f"{name}-{i}.txt").write_text("\n".join(map(str, ys)) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
