#!/usr/bin/env python3
"""Compares the evaluations of runs that trained alike.

Usage: check_evaluations.py REFERENCE RUN... [--rtol R] [--accuracy-atol A]
                            [--least-final-accuracy L]

Each argument is a `train --summary-json` file. Every RUN must hold as many
evaluations as REFERENCE, after the same steps and on as many examples, with
the test loss within R relative and the accuracy within A: the runs sum in
other orders (another kernel, another device), so the losses differ by f32
rounding, and a logit within rounding of another can flip one argmax.
With L, REFERENCE's last accuracy must be at least L (the runs are
compared on a model that learned something, not only on chance hits).
Prints each evaluation's differences and PASS, or FAIL and exits 1.
"""
import argparse
import json
import sys


def evaluations_agree(paths, rtol, accuracy_atol):
    """Prints the differences of each run's evaluations from the first
    run's; True when all are within the tolerances."""
    runs = [json.load(open(p))["evaluations"] for p in paths]
    ok = True
    for path, run in zip(paths[1:], runs[1:]):
        if len(run) != len(runs[0]) or not run:
            print(f"FAIL: {path}: {len(run)} evaluations against {len(runs[0])}")
            ok = False
            continue
        for a, b in zip(runs[0], run):
            loss = abs(a["loss"] - b["loss"]) / abs(a["loss"])
            accuracy = abs(a["accuracy"] - b["accuracy"])
            print(f"evaluation after step {a['step']}: {a['examples']} and "
                  f"{b['examples']} examples, loss {loss:.1e} relative, "
                  f"accuracy {a['accuracy']:.4f}, {accuracy:.1e} apart")
            if (loss > rtol or accuracy > accuracy_atol or
                    (a["step"], a["examples"]) != (b["step"], b["examples"])):
                print(f"FAIL: {path}: the evaluations differ")
                ok = False
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("summaries", nargs="+")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--accuracy-atol", type=float, default=1e-3)
    parser.add_argument("--least-final-accuracy", type=float)
    args = parser.parse_args()
    if len(args.summaries) < 2:
        parser.error("give a reference and at least one run")
    ok = evaluations_agree(args.summaries, args.rtol, args.accuracy_atol)
    if args.least_final_accuracy is not None:
        final = json.load(open(args.summaries[0]))["evaluations"][-1]["accuracy"]
        if final < args.least_final_accuracy:
            print(f"FAIL: the reference's last accuracy is {final:.4f}, "
                  f"below {args.least_final_accuracy}")
            ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
