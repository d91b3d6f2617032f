#!/usr/bin/env python3
"""The PyTorch side of scripts/gpu-check.sh: the same model, initial
weights, batches, optimizer and precision on the same GPU, in eager mode or
under torch.compile.

Usage: gpu_pytorch.py DUMP_DIR --mode eager|compile --out FILE.json
           [--precision f32|tf32|bf16] [--attention math|sdpa]

--precision: f32 (no TF32 anywhere), tf32 (torch.backends.*.allow_tf32, the
Mnemo trainer's default --matmul-precision high) or bf16 (autocast to
bfloat16 over TF32, as a model compiled with --precision=bf16 computes).
--attention sdpa runs the GPT's attention through
F.scaled_dot_product_attention (FlashAttention / cuDNN), as PyTorch users do.

DUMP_DIR is what the Mnemo trainer's `train --dump` wrote. Reports the
median milliseconds per step (forward, backward, clipping, optimizer step,
and loss.item(), which synchronizes, as the Mnemo trainer reads each
step's loss), after warm-up steps that are not timed (compilation,
cuBLAS's first calls), and the peak of torch.cuda.max_memory_allocated
above what the batches already held: parameters, gradients, optimizer
state, activations and workspaces.
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
import models  # noqa: E402
from models import MODELS  # noqa: E402

WARMUP = 5


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("--mode", choices=["eager", "compile"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--precision", choices=["f32", "tf32", "bf16"], default="f32")
    parser.add_argument("--attention", choices=["math", "sdpa"], default="math")
    args = parser.parse_args()
    tf32 = args.precision != "f32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    models.Attention.kind = args.attention
    device = torch.device("cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16,
                              enabled=args.precision == "bf16")

    with open(os.path.join(args.dump, "config.json")) as f:
        config = json.load(f)
    init, _ = safetensors_numpy.load(os.path.join(args.dump, "init.safetensors"))
    batches, _ = safetensors_numpy.load(os.path.join(args.dump, "batches.safetensors"))
    steps = config["steps"]
    data = [{name: torch.from_numpy(batches[f"{name}.{s}"]).to(device)
             for name in config["batch"]} for s in range(1, steps + 1)]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    baseline = torch.cuda.memory_allocated()

    model = MODELS[config["model"]](config["hyperparams"])
    model.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
    model.to(device)
    train = config["train"]
    optimizer = make_optimizer(train["optimizer"], model.parameters())
    lr_at = lr_schedule(train, config.get("total_steps", steps))
    forward = torch.compile(model) if args.mode == "compile" else model

    losses, times = [], []
    for step, batch in enumerate(data, 1):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = forward(batch)
        loss.backward()
        if "clip_grad_norm" in train:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["clip_grad_norm"])
        optimizer.step()
        losses.append(loss.item())
        if step > WARMUP:
            times.append((time.perf_counter() - begin) * 1000)
    peak = torch.cuda.max_memory_allocated() - baseline
    times.sort()
    with open(args.out, "w") as f:
        json.dump({"mode": args.mode, "precision": args.precision,
                   "attention": args.attention,
                   "step_ms_median": times[len(times) // 2],
                   "peak_bytes": peak, "losses": losses,
                   "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_name()}, f, indent=2)


if __name__ == "__main__":
    main()
