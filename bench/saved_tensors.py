#!/usr/bin/env python3
"""What the backward keeps: Mnemo's planned activations next to the tensors
PyTorch's autograd saves, for every example.

For each model in examples/, one training step in f32 at the model's own
sizes: Mnemo's activations at the planned peak (`mnemoc --memory-report=json`,
`activation_bytes`: the values produced in the forward and kept for the
backward, live where the step's memory peaks), without any recomputation
(`--remat=none`) and as planned by default (cheap values recomputed); and
PyTorch's saved tensors, counted with torch.autograd.graph.saved_tensors_hooks
over one forward of the same model (test/reference/models.py for the small
examples, run on the CPU on random data; GPT-2 small and LLaMA on the meta
device, with attention saving what FlashAttention-2 saves, as
bench/transformer_memory.py builds them). Each storage counts once, and the
parameters (which Linear and Embedding save for their backward) not at all:
Mnemo counts them elsewhere. The target (issue 20, item 8): at most 1.0x
on every example.

Usage: bench/saved_tensors.py [--build DIR] [--update-docs]
  --update-docs  also writes the table into docs/performance.md
"""
import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from models import MODELS  # noqa: E402
from transformer_memory import (GPT2, Llama, gib, hyperparameters,  # noqa: E402
                                mnemo_report, pytorch_saved_bytes, replace_block)


def random_batch(model_name, hp):
    """A batch of the model's inputs (values do not change what is saved)."""
    g = torch.Generator().manual_seed(0)
    if model_name in ("GPT", "GPT2", "Llama", "LSTMLanguageModel"):
        shape = (hp["batch"], hp["context"])
        return {"tokens": torch.randint(0, hp["vocab"], shape, generator=g, dtype=torch.int32),
                "next": torch.randint(0, hp["vocab"], shape, generator=g, dtype=torch.int32)}
    if model_name == "BertForMaskedLM":
        shape = (hp["batch"], hp["context"])
        return {"ids": torch.randint(0, hp["vocab"], shape, generator=g, dtype=torch.int32),
                "labels": torch.randint(0, hp["vocab"], shape, generator=g, dtype=torch.int32)}
    if model_name == "UNet":
        return {"image": torch.rand((hp["batch"], hp["channels"], hp["size"], hp["size"]), generator=g),
                "mask": torch.randint(0, hp["classes"], (hp["batch"], hp["size"], hp["size"]),
                                      generator=g, dtype=torch.int32)}
    image = ((hp["batch"], 1, 28, 28) if model_name == "CNN" else
             (hp["batch"], 3, hp["size"], hp["size"]) if model_name in ("ResNet18", "VisionTransformer") else
             (hp["batch"], 28, 28))
    return {"image": torch.rand(image, generator=g),
            "label": torch.randint(0, hp["classes"], (hp["batch"],), generator=g, dtype=torch.int32)}


def saved_on_cpu(model_name, hp):
    torch.manual_seed(0)
    model = MODELS[model_name](hp).train()
    batch = random_batch(model_name, hp)
    return pytorch_saved_bytes(model, lambda: model(batch))


def saved_on_meta(model_class, hp):
    model = model_class(hp, "sdpa").to(torch.device("meta")).train()
    tokens = torch.zeros(hp["batch"], hp["context"], dtype=torch.long, device="meta")
    return pytorch_saved_bytes(model, lambda: model(tokens, tokens))


# (example, how PyTorch's side is counted)
CASES = [("mlp.mn", lambda hp: saved_on_cpu("MLP", hp)),
         ("cnn.mn", lambda hp: saved_on_cpu("CNN", hp)),
         ("deep-mlp.mn", lambda hp: saved_on_cpu("DeepMLP", hp)),
         ("gpt.mn", lambda hp: saved_on_cpu("GPT", hp)),
         ("resnet18.mn", lambda hp: saved_on_cpu("ResNet18", hp)),
         ("lstm.mn", lambda hp: saved_on_cpu("LSTMLanguageModel", hp)),
         ("vit.mn", lambda hp: saved_on_cpu("VisionTransformer", hp)),
         ("bert.mn", lambda hp: saved_on_cpu("BertForMaskedLM", hp)),
         ("unet.mn", lambda hp: saved_on_cpu("UNet", hp)),
         ("llama.mn", lambda hp: saved_on_meta(Llama, hp)),
         ("gpt2-small.mn", lambda hp: saved_on_meta(GPT2, hp))]


def main(build, update_docs):
    torch.set_num_threads(2)
    lines = ["| example | PyTorch's saved tensors | Mnemo, no recomputation "
             "(--remat=none) | Mnemo (default) | Mnemo / PyTorch, none "
             "| Mnemo / PyTorch, default |",
             "| --- | --- | --- | --- | --- | --- |"]
    worst = 0.0
    for example, count in CASES:
        path = os.path.join("examples", example)
        hp = hyperparameters(build, path)
        saved = count(hp)
        kept = mnemo_report(build, path, "f32", ["--remat=none"])["activation_bytes"]
        plain = mnemo_report(build, path, "f32")["activation_bytes"]
        worst = max(worst, plain / saved)
        lines.append(f"| {example} | {gib(saved)} | {gib(kept)} | {gib(plain)} "
                     f"| {kept / saved:.2f}x | {plain / saved:.2f}x |")
    table = "\n".join(lines)
    print(table)
    print(f"\nworst Mnemo / PyTorch (default plans): {worst:.2f}x (target <= 1.0x)")
    if update_docs:
        doc = os.path.join(ROOT, "docs", "performance.md")
        with open(doc) as f:
            text = f.read()
        with open(doc, "w") as f:
            f.write(replace_block(text, "bench/saved_tensors.py", table))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    main(os.path.abspath(args.build), args.update_docs)
