#!/usr/bin/python3
"""Reads mnemoc --memory-report=json on stdin; checks that @train_step's
planned peak is within its memory budget, and prints the figures."""
import json
import sys

train = [f for f in json.load(sys.stdin)["functions"] if f["function"] == "train_step"][0]
peak, budget = train["peak_bytes"], train["memory_budget_bytes"]
verdict = "WITHIN" if peak <= budget else "OVER"
print("%s: peak %d of budget %d, %d ops recomputed, %.1f%% extra FLOPs" % (
    verdict, peak, budget, train["recomputed_ops"],
    100.0 * train["recomputed_flops"] / max(1, train["step_flops"] - train["recomputed_flops"])))
sys.exit(0 if peak <= budget else 1)
