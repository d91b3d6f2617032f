#!/usr/bin/python3
"""Which dtype each op of gpt.mn (or resnet18.mn) runs in under `amp`
(bf16), next to what PyTorch's CPU autocast (bf16) chooses for the same
model (models.GPT, models.ResNet18).

Usage: amp_dtypes.py MNEMO_FORWARD.mlir [--model gpt|resnet18]

MNEMO_FORWARD.mlir is @forward after the amp pass (mnemo-opt --amp). The
PyTorch side records every aten op's output dtype under
torch.autocast("cpu", torch.bfloat16) with a dispatch mode. Ops are compared
by kind (a Linear is PyTorch's addmm, Mnemo's matmul and bias add; ...).
Prints one line per kind and exits 1 when a kind differs and is not one of
the deliberate differences below (docs/mixed-precision.md lists them).
"""
import argparse
import os
import re
import sys
from collections import defaultdict

# Only dtypes are compared here, which no kernel choice changes. A oneDNN
# limited below the CPU's ISA (ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU,
# as the suite is run to act as another CPU) has no bf16 kernels, while
# PyTorch 1.13, seeing AVX-512, still asks it for them and fails; a real
# AVX2 CPU takes PyTorch's own bf16 kernels instead.
os.environ.pop("ONEDNN_MAX_CPU_ISA", None)
os.environ.pop("DNNL_MAX_CPU_ISA", None)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from models import GPT, ResNet18  # noqa: E402

# kind: (PyTorch aten ops, Mnemo ops)
GPT_KINDS = {
    "linear layers (product and bias)": ({"addmm", "mm"}, {"matmul", "bias add"}),
    # PyTorch's written-out attention, op by op; Mnemo's one fused op.
    "attention (products, scaling, mask, softmax)":
        ({"bmm", "div", "masked_fill", "_softmax"}, {"attention"}),
    "layer norm": ({"native_layer_norm"}, {"layernorm"}),
    "gelu": ({"gelu"}, {"gelu"}),
    "residual and position sums": ({"add"}, {"add"}),
    "embedding": ({"embedding"}, {"embedding"}),
    "loss": ({"_log_softmax", "nll_loss_forward"}, {"cross_entropy"}),
}
RESNET_KINDS = {
    "convolution": ({"convolution"}, {"conv2d"}),
    # Training mode: bf16 data, f32 scale, bias and statistics.
    "batch norm": ({"native_batch_norm"}, {"batch_norm"}),
    "relu": ({"relu_"}, {"relu"}),
    "linear layer (product and bias)": ({"addmm"}, {"matmul", "bias add"}),
    "loss": ({"_log_softmax", "nll_loss_forward"}, {"cross_entropy"}),
}
# Kinds whose dtypes differ on purpose, with why. gpt.mn has none: its
# softmax is inside fused attention, which computes the probabilities in
# f32 from bf16 operands and returns bf16, as FlashAttention does.
RESNET_DELIBERATE = {
    "relu": "@forward also computes the evaluation output, whose batch norm "
            "is f32 arithmetic on the f32 running statistics (x * scale + "
            "shift in bf16 would cancel near the running mean); its ReLU "
            "follows",
}
MODELS = {
    "gpt": (GPT, {"vocab": 256, "dim": 128, "context": 64, "heads": 4, "layers": 2},
            GPT_KINDS, {}),
    "resnet18": (ResNet18, {"width": 4, "cifar_stem": True, "classes": 5},
                 RESNET_KINDS, RESNET_DELIBERATE),
}


def torch_dtypes(name, hp):
    model = MODELS[name][0](hp)
    if name == "gpt":
        batch = {"tokens": torch.randint(0, hp["vocab"], (2, hp["context"])),
                 "next": torch.randint(0, hp["vocab"], (2, hp["context"]))}
    else:
        batch = {"image": torch.randn(4, 3, 16, 16),
                 "label": torch.randint(0, hp["classes"], (4,))}
    seen = defaultdict(set)

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            first = out[0] if isinstance(out, (tuple, list)) else out
            if isinstance(first, torch.Tensor):
                seen[func.__name__.split(".")[0]].add(
                    str(first.dtype).replace("torch.", "")
                    .replace("float32", "f32").replace("bfloat16", "bf16"))
            return out

    with torch.autocast("cpu", dtype=torch.bfloat16), Record():
        model(batch)
    return seen


def mnemo_dtypes(path):
    """Result element type of every op of @forward, by op name; an add of a
    product and a broadcast parameter is a bias add."""
    text = open(path).read()
    body = text[text.index("func.func @forward"):]
    body = body[:body.index("return")]
    broadcasts, products = set(), set()
    seen = defaultdict(set)
    for line in body.splitlines():
        # One result, or several (attention's output and log-sum-exp: the
        # first result's type is the op's).
        m = re.match(r"\s*(%[^=]+?) = mnemo\.(\w+) (.*)", line)
        if not m:
            continue
        name, op, rest = m.groups()
        name = name.split(",")[0].strip()
        types = re.findall(r"tensor<[^>]*?x?(f32|bf16|f16|i32|i1)>",
                           rest.split("->")[-1])
        if "->" in rest:
            types = types[:1]
        if not types:
            continue
        if op == "broadcast" and "%arg" in rest.split(":")[0]:
            broadcasts.add(name)
        if op == "cast":
            # A cast feeding a bias add carries a broadcast bias along.
            operand = rest.split()[0]
            if operand in broadcasts:
                broadcasts.add(name)
            continue
        if op == "matmul":
            products.add(name)
        if op == "add":
            operands = [o.strip(",") for o in rest.split(":")[0].split()]
            if any(o in broadcasts for o in operands) and any(
                    o in products for o in operands):
                op = "bias add"
        seen[op].add(types[-1])
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("forward")
    parser.add_argument("--model", choices=sorted(MODELS), default="gpt")
    args = parser.parse_args()
    _, hp, kinds, deliberate = MODELS[args.model]
    ours = mnemo_dtypes(args.forward)
    theirs = torch_dtypes(args.model, hp)
    failed = False
    print("%-44s %-12s %-12s %s" % ("kind", "PyTorch", "Mnemo", ""))
    for kind, (aten, mnemo) in kinds.items():
        t = set().union(*(theirs.get(a, set()) for a in aten))
        o = set().union(*(ours.get(m, set()) for m in mnemo))
        if not t or not o:
            verdict = "MISSING"
            failed = True
        elif t == o:
            verdict = "same"
        elif kind in deliberate:
            verdict = "deliberate: " + deliberate[kind]
        else:
            verdict = "DIFFERENT"
            failed = True
        print("%-44s %-12s %-12s %s" % (kind, ",".join(sorted(t)),
                                         ",".join(sorted(o)), verdict))
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
