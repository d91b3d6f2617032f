#!/usr/bin/env python3
"""Checks that two runs' losses track each other (CPU against CUDA trainer).

Usage: compare-losses.py A B [--rtol R]

A and B are losses.safetensors files (train --dump) or summary JSON files
(train --summary-json). Prints the largest relative difference and PASS, or
FAIL with the first step that differs by more than R (default 1e-3), and
exits 1 then. Plain Python (no numpy, no torch): it runs on the GPU machine
as it is.
"""
import argparse
import json
import struct
import sys


def losses(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".json"):
        return [float(x) for x in json.loads(data)["losses"]]
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    entry = header["loss"]
    begin, end = entry["data_offsets"]
    raw = data[8 + size + begin:8 + size + end]
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-3)
    args = parser.parse_args()
    a, b = losses(args.a), losses(args.b)
    if len(a) != len(b) or not a:
        print("FAIL: %d losses against %d" % (len(a), len(b)))
        return 1
    worst, worst_step = 0.0, 0
    for step, (x, y) in enumerate(zip(a, b), 1):
        diff = abs(x - y) / max(abs(x), 1e-12)
        if diff != diff:  # NaN
            diff = float("inf")
        if diff > worst:
            worst, worst_step = diff, step
    verdict = "PASS" if worst <= args.rtol else "FAIL"
    print("%s: %d steps, largest relative loss difference %.2e at step %d "
          "(tolerance %.0e); final losses %.6f and %.6f"
          % (verdict, len(a), worst, worst_step, args.rtol, a[-1], b[-1]))
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
