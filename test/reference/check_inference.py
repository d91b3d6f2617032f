#!/usr/bin/env python3
"""Compares the test loss and accuracy of an inference program with the
trainer's evaluation of the same weights (the fake-quantized forward).

    check_inference.py TRAIN_LOG INFER_LOG --loss TOL --accuracy TOL

Each log holds a line "test  loss L  accuracy A  (N examples)..." (the last
one counts). int8 activations round differently from f32 ones, so the two
agree within the tolerances, not exactly; 2:4 and CSR weights compute the
same products. Prints the figures and PASS, or FAIL and exits 1.
"""

import argparse
import re
import sys

LINE = re.compile(r"test\s+loss (\S+)\s+accuracy (\S+)\s+\((\d+) examples\)")


def figures(path):
    found = None
    with open(path) as log:
        for line in log:
            match = LINE.search(line)
            if match:
                found = (float(match[1]), float(match[2]), int(match[3]))
    if found is None:
        sys.exit(f"FAIL: no 'test  loss ...' line in {path}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("train_log")
    parser.add_argument("infer_log")
    parser.add_argument("--loss", type=float, required=True)
    parser.add_argument("--accuracy", type=float, required=True)
    args = parser.parse_args()
    train, infer = figures(args.train_log), figures(args.infer_log)
    print(f"trainer   loss {train[0]:.4f}  accuracy {train[1]:.4f}  ({train[2]} examples)")
    print(f"inference loss {infer[0]:.4f}  accuracy {infer[1]:.4f}  ({infer[2]} examples)")
    ok = train[2] == infer[2]
    ok &= abs(train[0] - infer[0]) <= args.loss
    ok &= abs(train[1] - infer[1]) <= args.accuracy
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
