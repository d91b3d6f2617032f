#!/usr/bin/env python3
"""Compares a compiled trainer's run with the reference interpreter's.

Usage: check_trainer.py REFERENCE_DUMP TRAINER_DUMP [--rtol R] [--update-rtol U]

Both directories are --dump outputs of the same steps from the same initial
weights and batches (the trainer replays the interpreter's batches with
`--data REF/batches.safetensors --init REF/init.safetensors`). Every step's
loss must agree within rtol; the largest parameter difference is printed,
measured against the size of the parameter's total update, for information
(a parameter whose gradient is pure rounding noise, such as an attention
key bias, can differ by a fraction of its tiny update); --update-rtol
bounds it where every gradient carries signal.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_numpy  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("reference")
    parser.add_argument("trainer")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--flip-rtol", type=float, default=None,
                        help="quantization-aware training: a loss may differ up to this much "
                             "on at most --flip-steps steps (see rounding_flips below)")
    parser.add_argument("--flip-steps", type=int, default=0)
    parser.add_argument("--update-rtol", type=float, default=None,
                        help="also require every parameter to differ by at most this "
                             "fraction of its total update (for a model whose every "
                             "parameter's gradient carries signal)")
    args = parser.parse_args()
    load = lambda d, name: safetensors_numpy.load(os.path.join(d, name + ".safetensors"))[0]
    ref, ours = load(args.reference, "losses")["loss"], load(args.trainer, "losses")["loss"]
    if len(ref) != len(ours):
        print(f"FAIL: {len(ref)} reference steps, {len(ours)} trainer steps")
        return 1
    failures = 0
    worst = 0.0
    flipped = []
    for step, (a, b) in enumerate(zip(ref, ours), 1):
        rel = abs(float(a) - float(b)) / max(abs(float(a)), 1e-30)
        worst = max(worst, rel)
        ok = rel <= args.rtol
        if not ok and args.flip_rtol is not None and rel <= args.flip_rtol:
            flipped.append(step)
            ok = len(flipped) <= args.flip_steps
        failures += not ok
        if not ok:
            print(f"  step {step}: interpreter {a:.7f}  trainer {b:.7f}  MISMATCH")
    if flipped:
        # rounding_flips: a fake-quantized weight on a rounding boundary
        # takes the other code, one quantization step away, on a last-bit
        # difference of the f32 sums before it (the BLAS kernel decides
        # them); the loss moves by that step's effect, bounded by
        # --flip-rtol, and such steps are bounded in number.
        print(f"  steps {flipped}: losses differ beyond rtol {args.rtol:g}, within "
              f"{args.flip_rtol:g}: a code flipped on a rounding boundary "
              f"({len(flipped)} of at most {args.flip_steps} steps)")
    init, final_ref, final_ours = (load(args.reference, "init"), load(args.reference, "final"),
                                   load(args.trainer, "final"))
    if set(final_ref) != set(final_ours):
        print(f"FAIL: parameter names differ: {sorted(set(final_ref) ^ set(final_ours))}")
        return 1
    update = max((float(np.max(np.abs(final_ours[k] - final_ref[k]))) /
                  (float(np.max(np.abs(final_ref[k] - init[k]))) + 1e-30), k)
                 for k in final_ref)
    print(f"{len(ref)} steps: losses agree within {worst:.2g} (rtol {args.rtol:g}); "
          f"largest parameter difference {update[0]:.2g} of its update ({update[1]})")
    if args.update_rtol is not None and not update[0] <= args.update_rtol:
        failures += 1
        print(f"  {update[1]}: MISMATCH, differs by more than {args.update_rtol:g} of its update")
    print("PASS" if failures == 0 else f"FAIL: {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
