#!/usr/bin/env python3
"""The GPU benchmark's table (scripts/gpu-check.sh bench), in Markdown.

Usage: gpu_table.py WORK "MODEL STEPS ITEMS PRECISION"...

WORK holds each model's Mnemo run (MODEL-bench.json, train --summary-json)
and PyTorch's (MODEL-torch-eager.json, MODEL-torch-compile.json, from
bench/gpu_pytorch.py); ITEMS is what one step processes (images, or batch x
context tokens). Ours: ms/step (median), items/s, and memory as the plan's
one cudaMalloc and as cudaMemGetInfo sees the process (the allocation plus
the CUDA context's and the libraries' own); PyTorch's:
torch.cuda.max_memory_allocated. The targets (issue 18): step time at most
torch.compile's, peak memory at most 0.6 x eager's. Plain Python.
"""
import json
import os
import sys


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    work, rows = sys.argv[1], sys.argv[2:]
    mib = lambda b: "%.0f" % (b / 2**20)
    gpu = torch_version = "?"
    lines = []
    for row in rows:
        model, _, items, precision = row.split()
        ours = load(os.path.join(work, model + "-bench.json"))
        eager = load(os.path.join(work, model + "-torch-eager.json"))
        compiled = load(os.path.join(work, model + "-torch-compile.json"))
        if not ours:
            lines.append("| %s | %s | failed | | | | | | | | |" % (model, precision))
            continue
        for theirs in (eager, compiled):
            if theirs:
                gpu, torch_version = theirs["gpu"], theirs["torch"]
        ms = lambda r: "%.2f" % r["step_ms_median"] if r else "n/a"
        memory = ours["memory"]
        rate = float(items) / (ours["step_ms_median"] / 1000.0)
        vs_compile = ("%.2fx" % (ours["step_ms_median"] / compiled["step_ms_median"])
                      if compiled else "n/a")
        vs_eager = ("%.2fx" % (memory["device_allocated_bytes"] / eager["peak_bytes"])
                    if eager and eager["peak_bytes"] else "n/a")
        lines.append("| %s | %s | %s | %s | %s | %s | %.3g | %s / %s | %s | %s | %s |" % (
            model, precision, ms(ours), ms(eager), ms(compiled), vs_compile, rate,
            mib(memory["device_allocated_bytes"]), mib(memory["device_measured_bytes"]),
            mib(eager["peak_bytes"]) if eager else "n/a",
            mib(compiled["peak_bytes"]) if compiled else "n/a", vs_eager))
    print("GPU: %s; PyTorch %s with scaled_dot_product_attention; Mnemo with "
          "--matmul-precision high (TF32), PyTorch with allow_tf32; bf16: "
          "mnemoc --precision=bf16 against torch.autocast(bfloat16)" % (gpu, torch_version))
    print()
    print("| model | precision | Mnemo ms/step | eager ms/step | compile ms/step "
          "| Mnemo time / compile | Mnemo items/s | Mnemo MiB (plan / measured) "
          "| eager peak MiB | compile peak MiB | Mnemo plan / eager |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
