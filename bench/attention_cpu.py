#!/usr/bin/python3
"""Attention alone on the CPU: the fused op next to the written-out graph.

bench/attention.mn (one causal attention, 12 heads of 64, batch 1) at
T = 256, 1024 and 2048, three ways, each a training step (forward,
backward, SGD) on the same random batches:
  - Mnemo fused: mnemoc's default (fuse-attention rewrites the model's
    softmax(where(causal, q @ k^T / 8, -inf)) @ v into mnemo.attention);
  - Mnemo written out: mnemoc --fuse-attention=false (the [T, T] scores,
    probabilities and their gradients planned as tensors);
  - PyTorch (Debian's 1.13, eager, CPU): the same step written out, as
    PyTorch 1.13 has no scaled_dot_product_attention.
Columns: median ms per step, RSS growth during training (the whole process
from before the model exists: parameters, activations, allocator caches),
and for Mnemo the planned arena. Same thread count for all.

Usage: bench/attention_cpu.py [--threads T] [--steps S] [--update-docs]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import safetensors_numpy  # noqa: E402

HEADS, HEAD_DIM = 12, 64
TOKENS = (256, 1024, 2048)

PYTORCH_STEP = r'''
import json, math, sys, time
import torch
sys.path.insert(0, sys.argv[4])
from procstatus import status_bytes
T, steps, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
H, D = %d, %d
g = torch.Generator().manual_seed(0)
xs = [torch.randn(1, H, T, D, generator=g) for _ in range(steps)]
ys = [torch.randn(1, H, T, D, generator=g) for _ in range(steps)]
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status_bytes("VmRSS")
w = [torch.nn.Parameter(torch.randn(D, D, generator=g) * 0.125) for _ in range(3)]
opt = torch.optim.SGD(w, lr=0.01)
mask = torch.ones(T, T, dtype=torch.bool).tril()
times = []
for x, y in zip(xs, ys):
    start = time.perf_counter()
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    s = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ v
    loss = torch.nn.functional.mse_loss(out, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"ms": sorted(times[1:])[len(times[1:]) // 2],
                  "rss": status_bytes("VmHWM") - before}))
''' % (HEADS, HEAD_DIM)


def mnemo(build, work, tokens, fused, steps, threads):
    out = os.path.join(work, f"{'fused' if fused else 'unfused'}-{tokens}")
    cmd = [os.path.join(build, "bin", "mnemoc"), os.path.join(ROOT, "bench", "attention.mn"),
           "-D", f"tokens={tokens}", "-o", out]
    if not fused:
        cmd.append("--fuse-attention=false")
    subprocess.run(cmd, check=True, capture_output=True)
    data = os.path.join(work, f"batches-{tokens}.safetensors")
    if not os.path.exists(data):
        rng = np.random.default_rng(0)
        tensors = {}
        for s in range(1, steps + 1):
            for name in ("x", "y"):
                tensors[f"{name}.{s}"] = rng.standard_normal(
                    (1, HEADS, tokens, HEAD_DIM)).astype(np.float32)
        safetensors_numpy.save(data, tensors)
    summary = os.path.join(out, "summary.json")
    subprocess.run([os.path.join(out, "train"), "--data", data, "--steps", str(steps),
                    "--threads", str(threads), "--quiet", "--summary-json", summary],
                   check=True, capture_output=True)
    with open(summary) as f:
        s = json.load(f)
    return s["step_ms_median"], s["memory"]["rss_growth_bytes"], s["memory"]["arena_bytes"]


def pytorch(tokens, steps, threads):
    run = subprocess.run(["/usr/bin/python3", "-c", PYTORCH_STEP, str(tokens), str(steps),
                          str(threads), os.path.join(ROOT, "bench")],
                         check=True, capture_output=True, text=True)
    r = json.loads(run.stdout)
    return r["ms"], r["rss"]


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    rows = ["| T | Mnemo fused ms/step | Mnemo written-out ms/step | PyTorch ms/step "
            "| fused / PyTorch time | Mnemo fused arena | Mnemo written-out arena "
            "| Mnemo fused RSS growth | Mnemo written-out RSS growth | PyTorch RSS growth "
            "| fused / PyTorch memory |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory() as work:
        for tokens in TOKENS:
            f_ms, f_rss, f_arena = mnemo(args.build, work, tokens, True, args.steps, args.threads)
            u_ms, u_rss, u_arena = mnemo(args.build, work, tokens, False, args.steps, args.threads)
            t_ms, t_rss = pytorch(tokens, args.steps, args.threads)
            rows.append(f"| {tokens} | {f_ms:.1f} | {u_ms:.1f} | {t_ms:.1f} | {f_ms / t_ms:.2f}x "
                        f"| {mib(f_arena)} | {mib(u_arena)} | {mib(f_rss)} | {mib(u_rss)} "
                        f"| {mib(t_rss)} | {f_rss / t_rss:.2f}x |")
            print(rows[-1], flush=True)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines()
                  if l.startswith("Model name")), "unknown CPU")
    import torch
    table = (f"Causal attention alone (bench/attention.mn: batch 1, 12 heads of 64), one "
             f"training step; {args.threads} threads on {model}; PyTorch {torch.__version__} "
             f"eager; median of {args.steps - 1} steps after the first.\n\n" + "\n".join(rows))
    print(table)
    if args.update_docs:
        doc = os.path.join(ROOT, "docs", "performance.md")
        text = open(doc).read()
        begin = "<!-- bench/attention_cpu.py -->\n"
        end = "<!-- end bench/attention_cpu.py -->"
        start = text.index(begin) + len(begin)
        text = text[:start] + table + "\n" + text[text.index(end):]
        open(doc, "w").write(text)


if __name__ == "__main__":
    main()
