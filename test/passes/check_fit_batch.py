#!/usr/bin/python3
"""Checks mnemoc --fit-batch's answers by compiling around them.

Usage: check_fit_batch.py MNEMOC BUDGET_BYTES FIT_OUTPUT -- MODEL [ARGS...]

For none, all and sqrt (fixed plans), the reported batch B must plan
within the budget and B + 1 over it; for auto and optimal, B must compile
under the budget (--remat=STRATEGY) and be at least every fixed policy's
batch (their searches try those plans). Prints one line per strategy and
PASS, or FAIL with the reason (exit 1)."""
import json
import re
import subprocess
import sys

mnemoc, budget, fit_output = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = sys.argv[sys.argv.index("--") + 1:]


def peak(strategy, batch, with_budget):
    cmd = [mnemoc, *model, "-D", f"batch={batch}", f"--remat={strategy}",
           "--memory-report=json", "--remat-time-limit=5"]
    if with_budget:
        cmd.append(f"--memory-budget={budget}")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return None
    train = [f for f in json.loads(run.stdout)["functions"]
             if f["function"] == "train_step"][0]
    return train["peak_bytes"]


batches = {}
for line in open(fit_output):
    m = re.match(r"\s+(\w+)\s+batch\s+(\d+)\s+peak", line)
    if m:
        batches[m.group(1)] = int(m.group(2))
failures = []
for strategy in ("none", "all", "sqrt"):
    b = batches[strategy]
    at, above = peak(strategy, b, False), peak(strategy, b + 1, False)
    ok = at is not None and at <= budget and above is not None and above > budget
    print(f"{strategy}: batch {b} plans {at}, batch {b + 1} plans {above}: "
          f"{'largest' if ok else 'WRONG'}")
    if not ok:
        failures.append(strategy)
for strategy in ("auto", "optimal"):
    b = batches[strategy]
    fits = peak(strategy, b, True) is not None
    floor = max(batches[s] for s in ("none", "all", "sqrt"))
    ok = fits and b >= floor
    print(f"{strategy}: batch {b} {'fits' if fits else 'DOES NOT FIT'}, "
          f">= {floor}: {'yes' if b >= floor else 'NO'}")
    if not ok:
        failures.append(strategy)
print("PASS" if not failures else "FAIL: " + ", ".join(failures))
sys.exit(1 if failures else 0)
