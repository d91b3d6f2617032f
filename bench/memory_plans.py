#!/usr/bin/env python3
"""Memory plans of the examples: arena, lower bound, naive, ratios, time.

For every example (and gpt.mn at 2, 4, 6 and 12 layers) compiles the model
with `mnemoc --memory-report=json --mlir-timing` and prints one row per step
function: the arena the planner chose, the lower bound (the most bytes live
at once under the chosen schedule), the bytes without any reuse, their
ratios, and the time the schedule and plan-memory passes took.

Usage: bench/memory_plans.py [--build DIR] [--update-docs]
  --update-docs  also writes the table into docs/performance.md
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [("mlp", "examples/mlp.mn", []), ("cnn", "examples/cnn.mn", []),
         ("gpt, 2 layers", "examples/gpt.mn", ["-D", "layers=2"]),
         ("gpt, 4 layers", "examples/gpt.mn", []),
         ("gpt, 6 layers", "examples/gpt.mn", ["-D", "layers=6"]),
         ("gpt, 12 layers", "examples/gpt.mn", ["-D", "layers=12"]),
         ("gpt2-small", "examples/gpt2-small.mn", []),
         ("llama", "examples/llama.mn", [])]


def mib(n):
    return f"{n / 2**20:.2f} MiB"


def measure(build, path, defines):
    cmd = [os.path.join(build, "bin", "mnemoc"), path, *defines, "--memory-report=json",
           "--mlir-timing", "--mlir-timing-display=list"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    report = json.loads(run.stdout)
    seconds = 0.0
    for name in ("Schedule", "PlanMemory"):
        match = re.search(r"([0-9.]+) \(\s*[0-9.]+%\)\s+" + name + r"\n", run.stderr)
        seconds += float(match.group(1)) if match else 0.0
    return report, seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    lines = ["| model | step | arena | lower bound | without reuse | arena / lower bound "
             "| arena / without reuse | planner | scheduling + planning |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    worst = 0.0
    for label, path, defines in CASES:
        report, seconds = measure(args.build, path, defines)
        for f in report["functions"]:
            ratio = f["arena_bytes"] / max(1, f["lower_bound_bytes"])
            worst = max(worst, ratio)
            lines.append(
                f"| {label} | @{f['function']} | {mib(f['arena_bytes'])} | "
                f"{mib(f['lower_bound_bytes'])} | {mib(f['naive_bytes'])} | {ratio:.3f} | "
                f"{f['arena_bytes'] / max(1, f['naive_bytes']):.3f} | {f['planner']} | "
                f"{seconds * 1000:.1f} ms |")
    table = "\n".join(lines)
    print(table)
    print(f"\nworst arena / lower bound: {worst:.3f} (target <= 1.02)")
    if args.update_docs:
        doc = os.path.join(ROOT, "docs", "performance.md")
        text = open(doc).read()
        begin, end = "<!-- bench/memory_plans.py -->\n", "<!-- end bench/memory_plans.py -->"
        start = text.index(begin) + len(begin)
        text = text[:start] + table + "\n" + text[text.index(end):]
        open(doc, "w").write(text)
    return 0 if worst <= 1.02 else 1


if __name__ == "__main__":
    sys.exit(main())
