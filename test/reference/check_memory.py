#!/usr/bin/env python3
"""The plan is the truth: checks a trainer run's memory against the plan.

Usage: check_memory.py MEMORY_REPORT.json SUMMARY.json

MEMORY_REPORT.json is `mnemoc --memory-report=json`; SUMMARY.json is the
trainer's `--summary-json`. Checks that
  1. the bytes the trainer allocated are exactly the plan's regions: the
     parameters, their gradients and the optimizer state of @train_step,
     and the batch, arena and workspace of whichever step needs more;
  2. its peak RSS growth during training stays within those bytes plus the
     CPU trainer's overhead that the report states;
  3. the steps made no heap allocation (the trainer counts operator new on
     the threads that run steps).
"""
import json
import sys


def main():
    report = json.load(open(sys.argv[1]))
    summary = json.load(open(sys.argv[2]))
    steps = {f["function"]: f for f in report["functions"]}
    train = steps["train_step"]
    both = list(steps.values())
    gradients = train["gradient_bytes"] if train["gradients_persistent"] else 0
    planned = (train["parameter_bytes"] + gradients + train["optimizer_state_bytes"] +
               max(f["input_bytes"] for f in both) + max(f["arena_bytes"] for f in both) +
               max(f["workspace_bytes"] for f in both))
    memory = summary["memory"]
    allocated = memory["allocated_bytes"]
    growth = memory["rss_growth_bytes"]
    overhead = train["cpu_trainer_overhead_bytes"]
    failures = 0
    if allocated != planned:
        print(f"FAIL: the trainer allocated {allocated} bytes; the plan says {planned}")
        failures += 1
    else:
        print(f"allocated {allocated} bytes = the plan's regions")
    if growth > allocated + overhead:
        print(f"FAIL: RSS grew by {growth} bytes, more than the plan's {allocated} "
              f"+ the stated overhead {overhead}")
        failures += 1
    else:
        print(f"RSS grew by {growth / 2**20:.2f} MiB <= plan {allocated / 2**20:.2f} MiB "
              f"+ overhead {overhead / 2**20:.2f} MiB "
              f"(measured overhead {(growth - allocated) / 2**20:.2f} MiB)")
    library = memory.get("library_allocations_during_steps", 0)
    if library:
        print(f"{library} allocations inside library calls (oneDNN's "
              "argument maps, transient)")
    allocations = memory["allocations_during_steps"]
    if allocations:
        print(f"FAIL: {allocations} heap allocations while steps ran")
        failures += 1
    else:
        print("no heap allocations while steps ran")
    print("PASS" if failures == 0 else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
