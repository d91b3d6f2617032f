#!/usr/bin/python3
"""Rematerialization under memory budgets: for gpt.mn and deep-mlp.mn, at
75, 50, 33 and 25% of the plan without recomputation, what each strategy
achieves: the planned peak (the budget is a promise: a plan over it is an
error), the extra FLOPs, and the measured CPU step time.

Usage: bench/remat.py [BUILD_DIR]   (default: build)

Strategies: none; all (keep each block's output, recompute the rest, as
torch.utils.checkpoint per block); sqrt (keep every ceil(sqrt(n)) blocks'
outputs, Chen et al. 2016); auto (the cheapest set found that fits,
checked against the planner); optimal (CBC's MILP under a time limit,
checked against the planner; the solver's status is printed). all and sqrt
are fixed policies: their peak does not depend on the budget, which they
either meet or not. After each budget, auto's step FLOPs against
optimal's (the issue's "auto within 5% of optimal").
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
MNEMOC = os.path.join(BUILD, "bin", "mnemoc")
MIB = 1 << 20
TIME_LIMIT = ["--remat-time-limit=30"]  # per MILP solve


def plan(model, args):
    run = subprocess.run([MNEMOC, model, "--memory-report=json"] + args,
                         capture_output=True, text=True)
    if run.returncode != 0:
        return None, run.stderr.strip().splitlines()[0]
    train = [f for f in json.loads(run.stdout)["functions"] if f["function"] == "train_step"][0]
    return train, None


def step_ms(model, args, data, work):
    out = os.path.join(work, "t")
    subprocess.run(["rm", "-rf", out])
    subprocess.run([MNEMOC, model, "-o", out] + args, check=True, capture_output=True)
    summary = os.path.join(work, "s.json")
    subprocess.run([os.path.join(out, "train"), "--data", data, "--steps", "20", "--quiet",
                    "--summary-json", summary], check=True, capture_output=True)
    return json.load(open(summary))["step_ms_median"]


def main():
    work = tempfile.mkdtemp()
    tokens = os.path.join(work, "tokens")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "make-tokens.py"), tokens],
                   check=True, capture_output=True)
    cases = [("gpt.mn", os.path.join(tokens, "train.bin")),
             ("deep-mlp.mn", "/usr/share/datasets/fashion-mnist")]
    print("| model | budget | strategy | planned peak | extra FLOPs | ms/step (CPU) |")
    print("|---|---|---|---|---|---|")
    for name, data in cases:
        model = os.path.join(ROOT, "examples", name)
        base, _ = plan(model, [])
        peak0 = base["peak_bytes"]
        ms0 = step_ms(model, [], data, work)
        print("| %s | none | none | %.2f MiB | 0 | %.1f |" % (name, peak0 / MIB, ms0))
        for share in (75, 50, 33, 25):
            budget = int(peak0 * share / 100)
            label = "%d%% (%.2f MiB)" % (share, budget / MIB)
            extras = {}
            for strategy in ("all", "sqrt", "auto", "optimal"):
                args = ["--memory-budget=%d" % budget, "--remat=" + strategy] + TIME_LIMIT
                train, error = plan(model, args)
                if error:
                    found = error.split("smallest planned peak found is ")[-1].split(" (")[0] \
                        if "smallest" in error else error.split("needs ")[-1].split(" (")[0]
                    print("| %s | %s | %s | not met (smallest: %s) | | |" % (name, label, strategy, found))
                    continue
                extra = 100.0 * train["recomputed_flops"] / max(1, train["step_flops"] - train["recomputed_flops"])
                extras[strategy] = extra
                ms = step_ms(model, args, data, work)
                solver = train.get("remat_solver", "")
                note = " (%s)" % solver.split(" (")[0] if solver else ""
                print("| %s | %s | %s%s | %.2f MiB | +%.1f%% | %.1f |" % (
                    name, label, strategy, note, train["peak_bytes"] / MIB, extra, ms))
            if "auto" in extras and "optimal" in extras:
                ratio = (100 + extras["auto"]) / (100 + extras["optimal"])
                print("| %s | %s | auto vs optimal | | step FLOPs x%.3f (%+.1f points) | |" % (
                    name, label, ratio, extras["auto"] - extras["optimal"]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
