#!/usr/bin/python3
"""The PyTorch side of bench/cpu.sh: trains the same model from the same
initial weights on the same batches, and measures what the Mnemo trainer
measures.

Usage: cpu_pytorch.py DUMP_DIR --threads T --out FILE.json [--autocast bf16]

--autocast bf16 runs the forward under torch.autocast("cpu", bfloat16),
PyTorch's side of a Mnemo trainer compiled with --precision=bf16.

DUMP_DIR is what `train --dump` wrote (config.json, init.safetensors,
batches.safetensors). Reports the median milliseconds per step (forward,
backward, clipping, optimizer step; the batch is already in memory, as the
Mnemo trainer's loader thread has it ready), the peak RSS growth during
training (from just before the model is built, so parameters, gradients,
optimizer state, activations and the allocator's caches all count, as the
plan's regions all count on the Mnemo side) and the losses.
"""
import argparse
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import safetensors_numpy  # noqa: E402
from compare import lr_schedule, make_optimizer  # noqa: E402
from procstatus import status_bytes  # noqa: E402
from models import MODELS  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--autocast", choices=["bf16"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with open(os.path.join(args.dump, "config.json")) as f:
        config = json.load(f)
    init, _ = safetensors_numpy.load(os.path.join(args.dump, "init.safetensors"))
    batches, _ = safetensors_numpy.load(os.path.join(args.dump, "batches.safetensors"))
    steps = config["steps"]
    data = [{name: torch.from_numpy(batches[f"{name}.{s}"]) for name in config["batch"]}
            for s in range(1, steps + 1)]
    init = {k: torch.from_numpy(v) for k, v in init.items()}

    # The baseline: data loaded, nothing of the model yet.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    rss_before = status_bytes("VmRSS")

    model = MODELS[config["model"]](config["hyperparams"])
    model.load_state_dict(init)
    train = config["train"]
    optimizer = make_optimizer(train["optimizer"], model.parameters())
    lr_at = lr_schedule(train, config.get("total_steps", steps))

    losses, times = [], []
    for step, batch in enumerate(data, 1):
        begin = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=args.autocast == "bf16"):
            loss = model(batch)
        loss.backward()
        if "clip_grad_norm" in train:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["clip_grad_norm"])
        optimizer.step()
        losses.append(loss.item())
        times.append((time.perf_counter() - begin) * 1000)
    rss_peak = status_bytes("VmHWM")
    times.sort()
    with open(args.out, "w") as f:
        json.dump({"step_ms_median": times[len(times) // 2], "losses": losses,
                   "rss_growth_bytes": rss_peak - rss_before,
                   "torch": torch.__version__}, f, indent=2)


if __name__ == "__main__":
    main()
