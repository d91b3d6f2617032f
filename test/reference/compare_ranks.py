#!/usr/bin/env python3
"""Compares a data-parallel run with one process that trained on the same
global batches: N ranks with batch b against one process with batch N*b.

Usage: compare_ranks.py ONE RANKS [--rtol R] [--atol A]

ONE and RANKS are `train --dump` directories (the data-parallel run's is
rank 0's). The losses at every step and every final parameter must agree
to R relative (and A absolute, for values near zero): the two sum each
gradient in another order (rows in two halves, then over the ranks), so
they differ by f32 rounding, which Adam's division by sqrt(v) carries into
the weights but does not grow over a short run. Prints the largest
differences and PASS, or FAIL and exits 1.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_evaluations import evaluations_agree  # noqa: E402
from safetensors_numpy import load  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("one")
    parser.add_argument("ranks")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--resumed", action="store_true",
                        help="RANKS resumed a checkpoint: compare its losses "
                             "with ONE's last steps")
    parser.add_argument("--summaries", nargs=2, metavar=("ONE", "RANKS"),
                        help="train --summary-json files whose evaluations "
                             "must agree too (loss to rtol, accuracy to 1e-3)")
    args = parser.parse_args()
    ok = True

    # A logit within rounding of another can flip one argmax: 1e-3 is 10 of
    # Fashion-MNIST's 10000 test images.
    if args.summaries and not evaluations_agree(args.summaries, args.rtol, 1e-3):
        ok = False

    one_losses = load(os.path.join(args.one, "losses.safetensors"))[0]["loss"]
    rank_losses = load(os.path.join(args.ranks, "losses.safetensors"))[0]["loss"]
    if args.resumed:
        # RANKS resumed from a checkpoint: its steps are ONE's last.
        one_losses = one_losses[-rank_losses.size:]
    if one_losses.shape != rank_losses.shape:
        print(f"FAIL: {one_losses.size} steps against {rank_losses.size}")
        return 1
    loss_diff = np.abs(one_losses.astype(np.float64) - rank_losses) / np.abs(one_losses)
    print(f"losses: {one_losses.size} steps, largest relative difference {loss_diff.max():.1e}")
    if loss_diff.max() > args.rtol:
        step = int(np.argmax(loss_diff > args.rtol)) + 1
        print(f"FAIL: step {step}: loss {one_losses[step - 1]} against {rank_losses[step - 1]}")
        ok = False

    one = load(os.path.join(args.one, "final.safetensors"))[0]
    ranks = load(os.path.join(args.ranks, "final.safetensors"))[0]
    if sorted(one) != sorted(ranks):
        print("FAIL: the runs hold different tensors")
        return 1
    worst, worst_name = 0.0, ""
    for name in sorted(one):
        a = one[name].astype(np.float64)
        b = ranks[name].astype(np.float64)
        excess = np.abs(a - b) - (args.atol + args.rtol * np.abs(a))
        if excess.size and excess.max() > worst:
            worst, worst_name = float(excess.max()), name
        rel = np.abs(a - b).max() / max(np.abs(a).max(), 1e-30) if a.size else 0.0
        print(f"{name}: largest difference {rel:.1e} of its largest value")
    if worst > 0:
        print(f"FAIL: {worst_name} differs beyond the tolerance")
        ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
