"""Compress a file with zlib and print the result as a JSON line (perftune example).

Usage: python3 compress.py INPUT --level 6 --memlevel 8 --wbits 15 --strategy default
Prints: {"size": <compressed bytes>, "ratio": <input/compressed>, "ms": <time>}
"""

import argparse
import json
import time
import zlib

STRATEGIES = {
    "default": zlib.Z_DEFAULT_STRATEGY,
    "filtered": zlib.Z_FILTERED,
    "huffman_only": zlib.Z_HUFFMAN_ONLY,
    "rle": zlib.Z_RLE,
    "fixed": zlib.Z_FIXED,
}

parser = argparse.ArgumentParser()
parser.add_argument("input")
parser.add_argument("--level", type=int, default=6)
parser.add_argument("--memlevel", type=int, default=8)
parser.add_argument("--wbits", type=int, default=15)
parser.add_argument("--strategy", choices=sorted(STRATEGIES), default="default")
args = parser.parse_args()

with open(args.input, "rb") as f:
    data = f.read()
t0 = time.perf_counter()
c = zlib.compressobj(args.level, zlib.DEFLATED, args.wbits, args.memlevel, STRATEGIES[args.strategy])
out = c.compress(data) + c.flush()
ms = (time.perf_counter() - t0) * 1000
assert zlib.decompress(out, args.wbits) == data
print(json.dumps({"size": len(out), "ratio": round(len(data) / len(out), 4), "ms": round(ms, 3)}))
