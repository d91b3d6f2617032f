#!/usr/bin/env python3
"""Transformers at real scale: Mnemo's planned step next to what PyTorch keeps.

For examples/gpt2-small.mn (GPT-2 small: vocab 50257, context 1024, dim
768, 12 heads, 12 layers, dropout 0.1, batch 8) and examples/llama.mn, in
f32 and bf16: Mnemo's planned peak of one training step (`mnemoc
--memory-report=json`), split into parameters, gradients, optimizer state,
activations and temporaries at the peak, and the largest buffer live there.

PyTorch's side is counted, not run: the same model is built on the meta
device (no memory, real shapes) and one forward is traced under
torch.autograd.graph.saved_tensors_hooks, which sees every tensor autograd
saves for the backward (each storage counted once). PyTorch's step then
holds at least the weights, their gradients, AdamW's two moments and those
saved tensors; its peak is higher still by the backward's temporaries, so
the ratio against this floor flatters PyTorch. Two attentions:
  - math: softmax(q k^T / sqrt(d) masked) -> dropout -> @ v, as written out
    (what the std library's MultiHeadAttention computes today);
  - sdpa: what F.scaled_dot_product_attention's FlashAttention kernel saves
    (q, k, v, the output and one log-sum-exp per row; the dropout mask is
    regenerated from a seed), the issue's reference point.
PyTorch 1.13's CPU autocast does not run on the meta device, so PyTorch's
columns are f32 in both rows.

Mnemo's peak in the first table is the default plan, in which the backward
recomputes cheap values (GELU's and the layer norms' outputs) instead of
keeping them. A second table gives GPT-2 small without any recomputation
(--remat=none), with the default's, and under a memory budget
(--remat=auto): the smallest peak recomputation reaches (the floor, from
the error an impossible budget gets) and the extra FLOPs at a 4 GiB
budget.

Usage: bench/transformer_memory.py [--build DIR] [--update-docs]
  --update-docs  also writes the table into docs/performance.md
"""
import argparse
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
from models import RMSNorm, SwiGLU, rotary  # noqa: E402

META = torch.device("meta")


def causal_scores(q, k):
    T = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~mask, float("-inf"))


class FlashSaved(torch.autograd.Function):
    """Causal attention that saves what FlashAttention-2 saves: q, k, v, the
    output and the row log-sum-exp. Forward only: the backward is never
    run, the saved set is what is measured."""

    @staticmethod
    def forward(ctx, q, k, v):
        scores = causal_scores(q, k)
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        out = torch.exp(scores - lse) @ v
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("measured, never run")


def attention(q, k, v, kind, drop, training):
    if kind == "sdpa":
        return FlashSaved.apply(q, k, v)
    att = F.dropout(F.softmax(causal_scores(q, k), dim=-1), drop, training)
    return att @ v


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bias, rope, drop, kind):
        super().__init__()
        self.heads, self.kv_heads, self.rope = heads, kv_heads, rope
        self.drop, self.kind = drop, kind
        d = dim // heads
        self.wq = nn.Linear(dim, dim, bias=bias)
        self.wk = nn.Linear(dim, kv_heads * d, bias=bias)
        self.wv = nn.Linear(dim, kv_heads * d, bias=bias)
        self.wo = nn.Linear(dim, dim, bias=bias)

    def forward(self, x):
        B, T, C = x.shape
        d = C // self.heads
        split = lambda t, h: t.view(B, T, h, d).transpose(1, 2)
        q = split(self.wq(x), self.heads)
        k = split(self.wk(x), self.kv_heads)
        v = split(self.wv(x), self.kv_heads)
        if self.rope:
            q, k = rotary(q, 10000.0), rotary(k, 10000.0)
        group = self.heads // self.kv_heads
        if group > 1:
            # repeat_interleave over the heads (which the meta device cannot
            # size without output_size).
            share = lambda t: t[:, :, None].expand(B, self.kv_heads, group, T, d).reshape(
                B, self.heads, T, d)
            k, v = share(k), share(v)
        y = attention(q, k, v, self.kind, self.drop, self.training)
        y = self.wo(y.transpose(1, 2).reshape(B, T, C))
        return F.dropout(y, self.drop, self.training)


class GPT2Block(nn.Module):
    def __init__(self, hp, kind):
        super().__init__()
        dim, drop = hp["dim"], hp["drop"]
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, hp["heads"], hp["heads"], True, False, drop, kind)
        self.fc, self.proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.drop = drop

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        mlp = self.proj(F.gelu(self.fc(self.ln2(h)), approximate="tanh"))
        return h + F.dropout(mlp, self.drop, self.training)


class GPT2(nn.Module):
    """examples/gpt2-small.mn: tied head, learned positions, dropout."""

    def __init__(self, hp, kind):
        super().__init__()
        self.wte = nn.Embedding(hp["vocab"], hp["dim"])
        self.wpe = nn.Embedding(hp["context"], hp["dim"])
        self.blocks = nn.ModuleList(GPT2Block(hp, kind) for _ in range(hp["layers"]))
        self.ln_f = nn.LayerNorm(hp["dim"])
        self.drop = hp["drop"]

    def forward(self, tokens, targets):
        h = F.dropout(self.wte(tokens) + self.wpe.weight, self.drop, self.training)
        for block in self.blocks:
            h = block(h)
        logits = self.ln_f(h) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class LlamaBlock(nn.Module):
    def __init__(self, hp, kind):
        super().__init__()
        dim = hp["dim"]
        self.attention_norm, self.ffn_norm = RMSNorm(dim, 1e-6), RMSNorm(dim, 1e-6)
        self.attention = SelfAttention(dim, hp["heads"], hp["kv_heads"], False, True, 0.0, kind)
        self.feed_forward = SwiGLU(dim, hp["hidden"])

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    """examples/llama.mn: untied head, no biases, rotary, grouped-query."""

    def __init__(self, hp, kind):
        super().__init__()
        self.tok_embeddings = nn.Embedding(hp["vocab"], hp["dim"])
        self.blocks = nn.ModuleList(LlamaBlock(hp, kind) for _ in range(hp["layers"]))
        self.norm = RMSNorm(hp["dim"], 1e-6)
        self.head = nn.Linear(hp["dim"], hp["vocab"], bias=False)

    def forward(self, tokens, targets):
        h = self.tok_embeddings(tokens)
        for block in self.blocks:
            h = block(h)
        logits = self.head(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def pytorch_saved_bytes(model, forward):
    """The bytes of the tensors autograd saves while `forward()` runs, each
    storage once; the parameters' storages (Linear and Embedding save their
    weights, and views of them) not at all: they are the weights, counted
    once, not activations."""
    weights = {p.storage()._cdata for p in model.parameters()}
    saved = {}

    def pack(t):
        key = t.storage()._cdata
        if key not in weights:
            saved.setdefault(key, t.storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return sum(saved.values())


def pytorch_floor(model_class, hp, kind):
    """Weights + gradients + AdamW's two moments + the tensors autograd saves
    for one step's backward, in bytes; and the saved tensors alone."""
    # Built on the CPU (PyTorch 1.13 has no meta-device context), then
    # moved: the shapes are what is measured.
    model = model_class(hp, kind).to(META).train()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    tokens = torch.zeros(hp["batch"], hp["context"], dtype=torch.long, device=META)
    activations = pytorch_saved_bytes(model, lambda: model(tokens, tokens))
    return 4 * weights + activations, activations


def mnemo_report(build, path, precision, extra=()):
    cmd = [os.path.join(build, "bin", "mnemoc"), path, "--memory-report=json",
           f"--precision={precision}", *extra]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    return next(f for f in json.loads(run.stdout)["functions"]
                if f["function"] == "train_step")


def mnemo_budgeted(build, path, precision, budget):
    """The step planned under `budget` bytes: (its report, None), or (None,
    the smallest peak mnemoc found) when nothing meets it."""
    cmd = [os.path.join(build, "bin", "mnemoc"), path, "--memory-report=json",
           f"--precision={precision}", f"--memory-budget={budget}"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if run.returncode == 0:
        return next(f for f in json.loads(run.stdout)["functions"]
                    if f["function"] == "train_step"), None
    marker = "the smallest planned peak found is "
    if marker not in run.stderr:
        raise SystemExit(f"mnemoc failed: {run.stderr}")
    return None, int(run.stderr.split(marker, 1)[1].split(" ", 1)[0])


def remat_table(build):
    lines = ["| model | precision | peak without recomputation (--remat=none) "
             "| peak, cheap values recomputed (default) | remat floor "
             "| peak at a 4 GiB budget | extra FLOPs at 4 GiB |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for precision in ("f32", "bf16"):
        path = "examples/gpt2-small.mn"
        kept = mnemo_report(build, path, precision, ["--remat=none"])
        plain = mnemo_report(build, path, precision)
        _, floor = mnemo_budgeted(build, path, precision, 1)
        at4, _ = mnemo_budgeted(build, path, precision, 4 << 30)
        if at4 is None:
            peak4 = extra = "does not fit"
        else:
            peak4 = gib(at4["peak_bytes"])
            extra = (f"+{100 * at4['recomputed_flops'] / (at4['step_flops'] - at4['recomputed_flops']):.1f}%"
                     if at4['recomputed_flops'] else "none needed")
        lines.append(f"| gpt2-small.mn | {precision} | {gib(kept['peak_bytes'])} "
                     f"| {gib(plain['peak_bytes'])} "
                     f"| {gib(floor)} | {peak4} | {extra} |")
    return "\n".join(lines)


def replace_block(text, name, table):
    begin = f"<!-- {name} -->\n"
    end = f"<!-- end {name} -->"
    start = text.index(begin) + len(begin)
    return text[:start] + table + "\n" + text[text.index(end):]


def hyperparameters(build, path):
    """The model's defaults, from the module attributes mnemoc writes."""
    run = subprocess.run([os.path.join(build, "bin", "mnemoc"), path,
                          "--emit=mlir", "--pass-pipeline="],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    first = run.stdout.split("mnemo.hyperparams = {", 1)[1].split("}", 1)[0]
    hp = {}
    for entry in first.split(","):
        key, value = entry.split("=")
        number = value.split(":")[0].strip()
        if number in ("true", "false"):
            hp[key.strip()] = number == "true"
        else:
            hp[key.strip()] = float(number) if "." in number or "e" in number else int(number)
    return hp


def gib(n):
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


CASES = [("gpt2-small.mn", "examples/gpt2-small.mn", GPT2),
         ("llama.mn", "examples/llama.mn", Llama)]


def main(build, update_docs):
    lines = ["| model | precision | Mnemo peak | parameters + gradients + optimizer state "
             "| activations at the peak | temporaries at the peak | largest buffer "
             "| PyTorch floor, math attention (saved tensors) "
             "| PyTorch floor, SDPA (saved tensors) | Mnemo / PyTorch+SDPA |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, path, model_class in CASES:
        hp = hyperparameters(build, path)
        math_floor, math_saved = pytorch_floor(model_class, hp, "math")
        sdpa_floor, sdpa_saved = pytorch_floor(model_class, hp, "sdpa")
        for precision in ("f32", "bf16"):
            r = mnemo_report(build, path, precision)
            state = r["parameter_bytes"] + r["gradient_bytes"] + r["optimizer_state_bytes"]
            top = r["largest_at_peak"][0]
            lines.append(
                f"| {label} | {precision} | {gib(r['peak_bytes'])} | {gib(state)} "
                f"| {gib(r['activation_bytes'])} | {gib(r['temporary_bytes'])} "
                f"| {top['op']} {top['type']} | {gib(math_floor)} ({gib(math_saved)}) "
                f"| {gib(sdpa_floor)} ({gib(sdpa_saved)}) "
                f"| {r['peak_bytes'] / sdpa_floor:.2f}x |")
    table = "\n".join(lines)
    print(table)
    remat = remat_table(build)
    print()
    print(remat)
    if update_docs:
        doc = os.path.join(ROOT, "docs", "performance.md")
        text = open(doc).read()
        text = replace_block(text, "bench/transformer_memory.py", table)
        text = replace_block(text, "bench/transformer_memory.py remat", remat)
        open(doc, "w").write(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    main(args.build, args.update_docs)
