#!/usr/bin/env python3
"""Checks and reports the pruning state of a trainer checkpoint.

Usage: check_pruned.py CHECKPOINT [--same-zeros PARAMS] [--pool NAME=a,b,...]

For every `X.mask` in the checkpoint (one bit per element of X, in i32
words; a set bit marks a pruned element), checks that X is exactly zero
where the bit is set, and so is every optimizer state of X's shape (Adam's
moments, adamw8bit's codes: code 0 is 0.0); prints X's sparsity and the
structure of its zeros (rows, N:M groups or unstructured). With
--same-zeros, X's zeros must be exactly those of the same parameter in
PARAMS (a reference run's final parameters). Prints PASS or FAIL.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_numpy  # noqa: E402


def bits_of(mask, count):
    words = mask.astype(np.int32).view(np.uint32)
    bits = (words[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    return bits.reshape(-1)[:count].astype(bool)


def structure(zero):
    if zero.ndim < 2 or not zero.any():
        return "unstructured"
    rows = zero.reshape(zero.shape[0], -1)
    dead = rows.all(axis=1)
    if dead.any() and (rows.any(axis=1) == dead).all():
        return f"{dead.sum()} of {len(dead)} rows"
    for m in (4, 8):
        if rows.shape[1] % m == 0:
            per_group = rows.reshape(-1, m).sum(axis=1)
            if (per_group == per_group[0]).all() and per_group[0] > 0:
                return f"{m - per_group[0]}:{m}"
    return "unstructured"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("--same-zeros")
    parser.add_argument("--pool", action="append", default=[])
    args = parser.parse_args()
    state, _ = safetensors_numpy.load(args.checkpoint)
    reference = safetensors_numpy.load(args.same_zeros)[0] if args.same_zeros else {}
    failures = 0
    pruned, mask_bytes, elements = {}, 0, 0
    for name in sorted(k[:-len(".mask")] for k in state if k.endswith(".mask")):
        weight = state[name]
        bits = bits_of(state[name + ".mask"], weight.size).reshape(weight.shape)
        mask_bytes += state[name + ".mask"].nbytes
        elements += weight.size
        pruned[name] = (bits.sum(), weight.size)
        if (weight[bits] != 0).any():
            print(f"FAIL: {name} is nonzero at {(weight[bits] != 0).sum()} pruned elements")
            failures += 1
        for other, value in state.items():
            if (other.startswith(name + ".") and other != name + ".mask"
                    and value.shape == weight.shape and (value[bits] != 0).any()):
                print(f"FAIL: {other} is nonzero at pruned elements")
                failures += 1
        if name in reference and not ((reference[name] == 0) == (weight == 0)).all():
            print(f"FAIL: {name}'s zeros differ from the reference's")
            failures += 1
        print(f"{name:<14} {weight.size:>6} elements  {100 * bits.mean():5.2f}% pruned"
              f"  structure: {structure(bits)}")
    for pool in args.pool:
        label, names = pool.split("=")
        count = sum(pruned[n][0] for n in names.split(","))
        total = sum(pruned[n][1] for n in names.split(","))
        print(f"{label} pool (global)  {total} elements  {100 * count / total:5.2f}% pruned")
    print(f"masks: {len(pruned)} tensors, {mask_bytes} bytes; torch.nn.utils.prune's "
          f"weight_orig and f32 weight_mask would add {8 * elements} bytes")
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
