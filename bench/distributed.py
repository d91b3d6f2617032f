#!/usr/bin/env python3
"""Data parallelism: step times here, and GPT-2 small's per-rank memory.

1. On this machine (honest, small): the same global batch trained by one
   process with 1 and 2 threads and by 2 ranks of 1 thread each (mpirun,
   MPI's collectives on shared memory), with and without ZeRO-1: the median
   ms per step (rank 0's), examples per second, the scaling efficiency
   (examples/s over 2 x one process with one thread) and the bytes each
   rank sends per step, from the plan (a ring all-reduce sends 2 (N-1)/N of
   the gradients; ZeRO-1's reduce-scatter and all-gather as much).
2. From the plan, not run: examples/gpt2-small.mn (batch 8 per rank,
   context 1024) at 8 ranks, f32 and bf16, with and without ZeRO-1: each
   rank's parameters, gradients, optimizer state and planned peak, next to
   the ZeRO paper's formula for Adam in mixed precision (16 bytes per
   parameter; 4 + 12/N with ZeRO-1: fp16 parameters and gradients, the f32
   master copy and moments sharded). Mnemo keeps f32 master parameters
   (which the update writes and the forward casts) and f32 gradients, so
   its own count is 4 + 4 + 8 = 16, and 8 + 8/N with ZeRO-1.

Usage: bench/distributed.py [--steps N] [--repeats R] [--update-docs]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
MNEMOC = os.path.join(BUILD, "bin", "mnemoc")
MIB = 1 << 20
GIB = 1 << 30


def run(args, env=None, **kwargs):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(args, check=True, capture_output=True, text=True,
                          env=full, **kwargs)


def mpirun(ranks, args):
    # As root (CI, these machines) Open MPI wants to be told.
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return run(["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to",
                "none"] + args, env=env)


def report(model, flags):
    text = run([MNEMOC, model, "--memory-report=json"] + flags).stdout
    return next(f for f in json.loads(text)["functions"]
                if f["function"] == "train_step")


def sent_per_rank(plan):
    """Bytes a rank sends per step in a ring (reduce-scatter + all-gather)."""
    n = plan["world_size"]
    if n == 1:
        return 0
    summed = sum(plan["gradient_bucket_bytes"])
    if plan["unsharded_optimizer_state_bytes"]:
        return (n - 1) * (summed + plan["gradient_bytes"]) // n
    return 2 * (n - 1) * summed // n


def step_times(work, steps, repeats):
    tokens = os.path.join(work, "tokens")
    run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "make-tokens.py"),
         tokens])
    data = os.path.join(tokens, "train.bin")
    gpt = os.path.join(ROOT, "examples", "gpt.mn")
    mlp = os.path.join(ROOT, "examples", "mlp.mn")
    fashion = "/usr/share/datasets/fashion-mnist"
    rows = []
    for name, model, data_path, batch, extra in [
            ("gpt (4 layers, dim 128, context 64)", gpt, data, 16, []),
            ("mlp (784-512-10)", mlp, fashion, 128, [])]:
        configs = [("1 rank x 1 thread", 1, 1, []),
                   ("1 rank x 2 threads", 1, 2, []),
                   ("2 ranks x 1 thread", 2, 1, []),
                   ("2 ranks x 1 thread, ZeRO-1", 2, 1, ["--shard-optimizer"])]
        base = None
        for label, ranks, threads, flags in configs:
            out = os.path.join(work, f"{os.path.basename(model)}-{ranks}-{len(flags)}")
            compile_flags = ["-D", f"batch={batch // ranks}"] + extra + flags
            if ranks > 1:
                compile_flags += ["--world-size", str(ranks)]
            if not os.path.exists(out):
                run([MNEMOC, model, "--emit=trainer", "-o", out] + compile_flags)
            plan = report(model, compile_flags)
            best = None
            for r in range(repeats):
                summary = os.path.join(work, f"summary-{r}.json")
                args = [os.path.join(out, "train"), "--data", data_path,
                        "--steps", str(steps), "--threads", str(threads),
                        "--quiet", "--summary-json", summary]
                if ranks > 1:
                    mpirun(ranks, args)
                else:
                    run(args)
                ms = json.load(open(summary))["step_ms_median"]
                best = ms if best is None else min(best, ms)
            per_second = batch / (best / 1000)
            if base is None:
                base = per_second
            rows.append((name, label, batch, best, per_second,
                         per_second / (base * threads * ranks),
                         sent_per_rank(plan), plan["peak_bytes"]))
    return rows


def memory_rows():
    model = os.path.join(ROOT, "examples", "gpt2-small.mn")
    rows = []
    for precision in ["f32", "bf16"]:
        for zero in [False, True]:
            flags = [f"--precision={precision}", "--world-size", "8"]
            if zero:
                flags.append("--shard-optimizer")
            plan = report(model, flags)
            params = plan["parameter_bytes"] // 4
            persistent = (plan["parameter_bytes"] + plan["gradient_bytes"] +
                          plan["optimizer_state_bytes"])
            paper = (4 + 12 / 8 if zero else 16) * params
            ours = (8 + 8 / 8 if zero else 16) * params
            rows.append((precision, "ZeRO-1" if zero else "replicated", params,
                         plan["parameter_bytes"], plan["gradient_bytes"],
                         plan["optimizer_state_bytes"], persistent, ours,
                         paper, plan["peak_bytes"], sent_per_rank(plan)))
    return rows


def tables(times, memory):
    lines = ["| model | run (global batch) | ms/step | examples/s | scaling "
             "efficiency | sent per rank per step | planned peak per rank |",
             "|---|---|---|---|---|---|---|"]
    for name, label, batch, ms, eps, eff, sent, peak in times:
        lines.append(f"| {name} | {label} ({batch}) | {ms:.2f} | {eps:.0f} | "
                     f"{eff:.2f} | {sent / MIB:.2f} MiB | {peak / MIB:.1f} MiB |")
    lines += ["", "| GPT-2 small, 8 ranks x batch 8 | optimizer state | "
              "parameters (Ψ) | parameters | gradients | optimizer state | "
              "persistent per rank | Mnemo's formula | ZeRO paper's formula | "
              "planned peak per rank | sent per rank per step |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (precision, mode, params, p, g, s, persistent, ours, paper, peak,
         sent) in memory:
        lines.append(
            f"| {precision} | {mode} | {params / 1e6:.1f} M | {p / MIB:.1f} MiB "
            f"| {g / MIB:.1f} MiB | {s / MIB:.1f} MiB | {persistent / MIB:.1f} "
            f"MiB | {ours / MIB:.1f} MiB | {paper / MIB:.1f} MiB | "
            f"{peak / GIB:.2f} GiB | {sent / MIB:.0f} MiB |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        times = step_times(work, args.steps, args.repeats)
    text = tables(times, memory_rows())
    print(text)
    if args.update_docs:
        path = os.path.join(ROOT, "docs", "distributed.md")
        doc = open(path).read()
        begin = "<!-- bench/distributed.py -->\n"
        end = "<!-- end bench/distributed.py -->"
        head, rest = doc.split(begin)
        _, tail = rest.split(end)
        open(path, "w").write(head + begin + text + "\n" + end + tail)


if __name__ == "__main__":
    sys.exit(main())
