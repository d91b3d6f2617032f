#!/usr/bin/python3
"""Usage: check_tuned_plan.py REPORT.json PLAN.json [IR.mlir]

REPORT.json is `mnemoc --memory-report=json`, PLAN.json `mnemoc --emit=plan`
of the same compilation. Checks that @train_step's peak is one number three
ways: what remat tuned its choice for (remat_peak_bytes), the report's
peak_bytes, and the emitted plan's regions (arguments, arena, gradient
region, workspace). IR.mlir, planned by another tool (mnemo-opt with the
textual `mnemo-default{...}` pipeline), must record the same tuned peak in
its #mnemo.remat."""
import json
import re
import sys

report = {f["function"]: f for f in json.load(open(sys.argv[1]))["functions"]}
plan = {f["function"]: f for f in json.load(open(sys.argv[2]))["functions"]}
train, planned = report["train_step"], plan["train_step"]
emitted = (sum(a["bytes"] for a in planned["arguments"]) + planned["arena_bytes"] +
           planned["gradient_bytes"] + planned["workspace_bytes"])
print("gradients in their own region" if train["gradients_persistent"] else "gradients in the arena")
print(f"{train['recomputed_ops']} ops recomputed, budget {train['memory_budget_bytes']}")
tuned, peak = train["remat_peak_bytes"], train["peak_bytes"]
same = tuned == peak == emitted
print(f"remat tuned for {tuned} {'=' if tuned == peak else '!='} report {peak} "
      f"{'=' if peak == emitted else '!='} emitted plan {emitted}")
ok = same and 0 < peak <= train["memory_budget_bytes"]
if len(sys.argv) > 3:
    recorded = re.findall(r"#mnemo\.remat<[^>]*peak_bytes = (\d+)", open(sys.argv[3]).read())
    print(f"{sys.argv[3].split('/')[-1]} records {recorded}")
    ok = ok and recorded == [str(tuned)]
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
