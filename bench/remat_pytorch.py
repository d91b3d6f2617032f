#!/usr/bin/python3
"""Activation checkpointing in PyTorch next to Mnemo's: gpt.mn and
deep-mlp.mn, each without recomputation and with every block recomputed
(torch.utils.checkpoint per block; Mnemo's --remat=all). Both train 6
steps on the CPU (2 threads) on the same batches; reported are PyTorch's
peak RSS growth during training (from just before the model is built, as
bench/cpu_pytorch.py measures it) and Mnemo's planned peak and RSS growth.

Usage: bench/remat_pytorch.py [BUILD_DIR]
"""
import json
import os
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import safetensors_numpy  # noqa: E402
from models import MODELS  # noqa: E402
from procstatus import status_bytes  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
MIB = 1 << 20
STEPS = 6


def torch_growth(dump, checkpointed):
    """Runs in a child process so that each measurement starts clean."""
    code = r'''
import json, sys, torch
sys.path.insert(0, %r)
import safetensors_numpy
from models import MODELS
torch.set_num_threads(2)
config = json.load(open(%r + "/config.json"))
batches, _ = safetensors_numpy.load(%r + "/batches.safetensors")
data = [{n: torch.from_numpy(batches[n + "." + str(s)]) for n in config["batch"]} for s in range(1, %d + 1)]
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
hp = dict(config["hyperparams"]); hp["checkpoint"] = %r
model = MODELS[config["model"]](hp)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for batch in data:
    opt.zero_grad(set_to_none=True)
    model(batch).backward()
    opt.step()
print(status("VmHWM") - before)
''' % (os.path.join(ROOT, "test", "reference"), dump, dump, STEPS, checkpointed)
    out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def main():
    work = tempfile.mkdtemp()
    tokens = os.path.join(work, "tokens")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "make-tokens.py"), tokens],
                   check=True, capture_output=True)
    mnemoc = os.path.join(BUILD, "bin", "mnemoc")
    print("| model | recomputation | PyTorch RSS growth | Mnemo planned peak | Mnemo RSS growth |")
    print("|---|---|---|---|---|")
    for name, data in (("gpt.mn", os.path.join(tokens, "train.bin")),
                       ("deep-mlp.mn", "/usr/share/datasets/fashion-mnist")):
        model = os.path.join(ROOT, "examples", name)
        dump = None
        for strategy, checkpointed in (("none", False), ("all", True)):
            out = os.path.join(work, name.replace(".", "_") + "_" + strategy)
            subprocess.run([mnemoc, model, "--remat=" + strategy, "-o", out], check=True,
                           capture_output=True)
            args = [os.path.join(out, "train"), "--data", data, "--steps", str(STEPS), "--threads", "2",
                    "--quiet"]
            if dump is None:
                # The batches for PyTorch, from a run of its own (a dump
                # keeps them in memory, which the measured run must not).
                dump = os.path.join(work, name.replace(".", "_") + "_dump")
                subprocess.run(args + ["--dump", dump], check=True, capture_output=True)
            subprocess.run(args + ["--summary-json", os.path.join(out, "s.json")], check=True,
                           capture_output=True)
            summary = json.load(open(os.path.join(out, "s.json")))
            plan = json.loads(subprocess.run([mnemoc, model, "--remat=" + strategy, "--memory-report=json"],
                                             check=True, capture_output=True, text=True).stdout)
            peak = [f for f in plan["functions"] if f["function"] == "train_step"][0]["peak_bytes"]
            growth = torch_growth(dump, checkpointed)
            print("| %s | %s | %.1f MiB | %.1f MiB | %.1f MiB |" % (
                name, "every block (all)" if checkpointed else "none", growth / MIB, peak / MIB,
                summary["memory"]["rss_growth_bytes"] / MIB))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
