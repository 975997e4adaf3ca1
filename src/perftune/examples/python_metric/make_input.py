"""Write input.txt: deterministic pseudo-log text (about 400 KB) for the compression example."""

import random

rng = random.Random(7)
words = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kernel",
    "tile",
    "block",
    "unroll",
    "vector",
    "cache",
    "miss",
    "hit",
    "load",
    "store",
    "branch",
    "fetch",
    "retire",
    "stall",
    "thread",
    "warp",
]
lines = []
for i in range(6000):
    n = rng.randint(3, 12)
    lines.append(
        f"{i:06d} [{rng.choice(['INFO', 'WARN', 'DEBUG'])}] "
        + " ".join(rng.choice(words) for _ in range(n))
        + f" value={rng.randint(0, 99999)}"
    )
with open("input.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
