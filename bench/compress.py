#!/usr/bin/python3
"""Pruning and quantization-aware training on Fashion-MNIST: Mnemo's
`prune` and `quantize` directives next to torch.nn.utils.prune, PyTorch's
FakeQuantize and quantize_dynamic, on the same models with the same
settings.

Usage: bench/compress.py [--models mlp,cnn] [--methods dense,unstructured,2:4,qat-int8]
                         [--threads T] [--json FILE]

For each model (examples/mlp.mn, 10 epochs; examples/cnn.mn, 3 epochs; the
models' own optimizer, schedule and batch) and method:
- dense: no pruning, the baseline;
- unstructured: 50% magnitude pruning of every weight matrix and
  convolution, per layer, ramped up with Zhu & Gupta's cubic schedule
  (updates every 100 steps from the start step to the end step) and then
  fine-tuned with the masks fixed for the rest of the run;
- 2:4: one-shot 2:4 pruning (2 of every 4 consecutive input weights) of the
  weights whose rows are a multiple of 4 elements, then fine-tuning;
- qat-int8: quantization-aware training of every weight in int8 (per output
  channel, symmetric, min/max observer) from the start;
- ptq-int8, ptq-int4: the dense run, its weights quantized after training
  by `train --export` (int8 per output channel; int4 per group of 16, on
  the weights whose rows 16 divides).

Every Mnemo row is also evaluated from its export: the exported weights,
dequantized or unpacked, in PyTorch's twin of the model.

Mnemo trains with a variant of the model file that adds the directives;
PyTorch trains models.py's twin with AdamW and the same schedule, and
prunes at the same steps to the same sparsity (l1_unstructured for
magnitude, custom_from_mask with the same 2:4 rule) or fake-quantizes with
torch.ao.quantization's FakeQuantize and observer of the same settings.
Both report the test accuracy after the last epoch, the sparsity reached,
and the bytes of model state (Mnemo: parameters, bitmasks and observer
ranges in the checkpoint, and the weights `train --export` writes for
inference: int8 with scales, 2:4-packed or CSR; PyTorch: the serialized
state_dict, which keeps weight_orig and an f32 weight_mask per pruned
tensor). The dense PyTorch
model is also converted by quantize_dynamic (int8 Linear layers) and
evaluated: its accuracy and serialized bytes are the last columns.

A second table runs each export through the model's inference program
(mnemoc --mode=inference): its test accuracy, the plan's weight bytes and
total bytes (weights, one batch, arena, workspace: no gradients or
optimizer state) and its median milliseconds per test batch, next to
PyTorch's forward of the dense model and of quantize_dynamic's, at the same
batch size and threads.
"""
import argparse
import gzip
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
import torch.nn.utils.prune as prune

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import safetensors_numpy  # noqa: E402
from check_export import unpacked  # noqa: E402
from check_pruned import bits_of  # noqa: E402
from compare import apply_qat, lr_schedule, make_optimizer, trained_parameters  # noqa: E402
from models import F32_MEAN, F32_STD, MODELS  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"

# Pruning steps: unstructured ramps from `start` to `end` every 100 steps;
# 2:4 prunes once at `one_shot`. The rest of each run fine-tunes.
MODELS_UNDER_TEST = {
    "mlp": {"file": "mlp.mn", "model": "MLP", "start": 500, "end": 2800, "one_shot": 1400,
            "unstructured": ["fc1.weight", "fc2.weight"],
            "2:4": ["fc1.weight", "fc2.weight"]},
    # block1's kernels have rows of 9 (1 x 3 x 3): not 2:4-able.
    "cnn": {"file": "cnn.mn", "model": "CNN", "start": 300, "end": 1700, "one_shot": 938,
            "unstructured": ["block1.conv.weight", "block2.conv.weight", "fc.weight"],
            "2:4": ["block2.conv.weight", "fc.weight"]},
}
SPARSITY = 0.5
EVERY = 100
TEST_SET = None  # Fashion-MNIST's test images and labels, once loaded


def directives(spec, method):
    if method == "dense":
        return []
    if method == "qat-int8":
        return [f"quantize {w} = qat(bits = 8, per_channel, symmetric, observer = minmax)"
                for w in spec["unstructured"]]
    if method == "ptq-int8":
        return [f"quantize {w} = int8(per_channel)" for w in spec["unstructured"]]
    if method == "ptq-int4":
        return [f"quantize {w} = int4(per_group, group = 16)" for w in spec["2:4"]]
    if method == "unstructured":
        return [f"prune {w} = magnitude(sparsity = {SPARSITY}, start = {spec['start']}, "
                f"end = {spec['end']}, every = {EVERY})" for w in spec["unstructured"]]
    return [f"prune {w} = nm(n = 2, m = 4, start = {spec['one_shot']})" for w in spec["2:4"]]


def scheduled_sparsity(step, start, end, final):
    """lang/ops/pruning/PruningFormulas.h's scheduledSparsity, for PyTorch."""
    first, last = max(start, 1), max(end, max(start, 1))
    if step < first or step > last or ((step - first) % EVERY and step != last):
        return None
    if last == first:
        return final
    remaining = 1.0 - (step - first) / (last - first)
    return final * (1.0 - remaining ** 3)


def run_mnemo(name, spec, method, work, threads):
    source = open(os.path.join(ROOT, "examples", spec["file"])).read()
    lines = "".join(f"    {d}\n" for d in directives(spec, method))
    variant = re.sub(r"(\n  train \{\n)", r"\1" + lines.replace("\\", "\\\\"), source)
    tag = f"{name}-{method.replace(':', 'of')}"
    model = os.path.join(work, tag + ".mn")
    with open(model, "w") as f:
        f.write(variant)
    mnemoc = os.path.join(ROOT, "build", "bin", "mnemoc")
    out = os.path.join(work, tag)
    subprocess.run([mnemoc, model, "-o", out], check=True, capture_output=True,
                   env=dict(os.environ, MNEMO_STDLIB=os.path.join(ROOT, "lang", "std")))
    summary, ckpt, export = out + ".json", out + ".safetensors", out + "-export.safetensors"
    started = time.time()
    subprocess.run([os.path.join(out, "train"), "--data", DATA, "--eval", "--quiet",
                    "--threads", str(threads), "--summary-json", summary, "--save", ckpt,
                    "--export", export], check=True, capture_output=True)
    seconds = time.time() - started
    accuracy = json.load(open(summary))["evaluations"][-1]["accuracy"]
    state, _ = safetensors_numpy.load(ckpt)
    # The model: parameters, masks and ranges, not the optimizer's moments.
    model_bytes = sum(v.nbytes for k, v in state.items()
                      if not re.search(r"\.(exp_avg|exp_avg_sq|momentum_buffer)(\.|$)", k))
    pruned = total = 0
    for key in (k for k in state if k.endswith(".mask")):
        weight = state[key[:-5]]
        bits = bits_of(state[key], weight.size)
        pruned += bits.sum()
        total += weight.size
        assert (weight.reshape(-1)[bits] == 0).all()
    exported, layouts = safetensors_numpy.load(export)
    export_bytes = sum(v.nbytes for v in exported.values())
    # The inference program of the same model file, on the export.
    inference = out + "-infer"
    subprocess.run([mnemoc, model, "--mode=inference", "-o", inference], check=True,
                   capture_output=True,
                   env=dict(os.environ, MNEMO_STDLIB=os.path.join(ROOT, "lang", "std")))
    subprocess.run([os.path.join(inference, "infer"), "--weights", export, "--data", DATA,
                    "--device", "cpu", "--threads", str(threads), "--summary-json",
                    out + "-infer.json"], check=True, capture_output=True)
    infer = json.load(open(out + "-infer.json"))
    return {"accuracy": accuracy, "sparsity": pruned / total if total else 0.0,
            "model_bytes": int(model_bytes), "export_bytes": int(export_bytes),
            "export_accuracy": export_accuracy(name, spec, state, exported, layouts),
            "inference_accuracy": infer["accuracy"],
            "inference_weight_bytes": infer["memory"]["weight_bytes"],
            "inference_plan_bytes": infer["memory"]["allocated_bytes"],
            "inference_ms": infer["ms_per_batch"], "seconds": seconds}


def export_accuracy(name, spec, state, exported, layouts):
    """The test accuracy of the exported weights (dequantized or unpacked),
    in PyTorch's twin of the model: what an inference engine reading the
    export would compute."""
    config = json.load(open(os.path.join(ROOT, "build", "bench-compress-config",
                                         name + ".json")))
    model = MODELS[spec["model"]](config["hyperparams"])
    weights = {}
    for key in model.state_dict():
        layout = layouts.get(key, "dense")
        weights[key] = torch.from_numpy(
            unpacked(key, layout, exported) if layout != "dense" else state[key])
    model.load_state_dict(weights)
    return accuracy(name, model, TEST_SET)


def load_idx(prefix):
    with gzip.open(os.path.join(DATA, prefix + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(DATA, prefix + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def logits_of(name, model, images):
    if name == "mlp":
        x = (images.reshape(images.shape[0], 28 * 28) - F32_MEAN) / F32_STD
        return model.fc2(F.relu(model.fc1(x)))
    h = model.block2(model.block1(images))
    return model.fc(torch.flatten(h, 1))


def module_of(model, weight):
    module = model
    for part in weight.split(".")[:-1]:
        module = getattr(module, part)
    return module


def two_of_four_mask(weight):
    rows = weight.detach().abs().reshape(-1, 4)
    keep = torch.zeros_like(rows)
    keep.scatter_(1, rows.topk(2, dim=1).indices, 1.0)
    return keep.reshape(weight.shape)


def run_pytorch(name, spec, method, threads, train_set, test_set):
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    mnemo = json.load(open(os.path.join(ROOT, "build", "bench-compress-config", name + ".json")))
    hp, train = mnemo["hyperparams"], mnemo["train"]
    model = MODELS[spec["model"]](hp)
    optimizer = make_optimizer(train["optimizer"], model.parameters())
    batch = hp["batch"]
    images, labels = train_set
    steps_per_epoch = images.shape[0] // batch
    total = steps_per_epoch * train["epochs"]
    lr_at = lr_schedule(train, total)
    targets = spec["2:4"] if method == "2:4" else spec["unstructured"]
    if method == "qat-int8":
        apply_qat(model, {"quantize": [{"kind": "qat", "bits": 8, "granularity": "per_channel",
                                        "scheme": "symmetric", "observer": "minmax",
                                        "params": targets}]})
        optimizer = make_optimizer(train["optimizer"], model.parameters())
    started = time.time()
    step = 0
    for epoch in range(train["epochs"]):
        order = torch.randperm(images.shape[0])
        for b in range(steps_per_epoch):
            step += 1
            index = order[b * batch:(b + 1) * batch]
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
            optimizer.zero_grad()
            loss = model({"image": images[index], "label": labels[index]})
            loss.backward()
            optimizer.step()
            if method == "unstructured":
                sparsity = scheduled_sparsity(step, spec["start"], spec["end"], SPARSITY)
                if sparsity is not None:
                    for w in targets:
                        module = module_of(model, w)
                        current = getattr(module, "weight_mask", None)
                        already = int((current == 0).sum()) if current is not None else 0
                        goal = int(round(sparsity * module.weight.numel()))
                        if goal > already:
                            prune.l1_unstructured(module, "weight", amount=goal - already)
            elif method == "2:4" and step == spec["one_shot"]:
                for w in targets:
                    module = module_of(model, w)
                    prune.custom_from_mask(module, "weight", two_of_four_mask(module.weight))
    seconds = time.time() - started
    # Evaluation reads the observed ranges (as Mnemo's eval step does).
    model.apply(torch.ao.quantization.disable_observer)
    result = {"accuracy": accuracy(name, model, test_set), "seconds": seconds,
              "model_bytes": serialized_bytes(model)}
    pruned = total_elements = 0
    for w in targets if method in ("unstructured", "2:4") else []:
        weight = module_of(model, w).weight
        pruned += int((weight == 0).sum())
        total_elements += weight.numel()
    result["sparsity"] = pruned / total_elements if total_elements else 0.0
    if method == "dense":
        dynamic = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                         dtype=torch.qint8)
        result["dynamic_accuracy"] = accuracy(name, dynamic, test_set)
        result["dynamic_bytes"] = serialized_bytes(dynamic)
        result["inference_ms"] = inference_ms(name, model, test_set, batch)
        result["dynamic_inference_ms"] = inference_ms(name, dynamic, test_set, batch)
    return result


def inference_ms(name, model, test_set, batch):
    """Median milliseconds of a forward pass over one test batch of the
    model's batch size (the inference program's unit), after a warm-up."""
    images = test_set[0]
    times = []
    with torch.no_grad():
        for i in range(0, images.shape[0] - batch + 1, batch):
            started = time.perf_counter()
            logits_of(name, model, images[i:i + batch])
            times.append(1e3 * (time.perf_counter() - started))
    return float(np.median(times))


def accuracy(name, model, test_set):
    with torch.no_grad():
        images, labels = test_set
        correct = sum(int((logits_of(name, model, images[i:i + 1000]).argmax(1)
                           == labels[i:i + 1000]).sum())
                      for i in range(0, images.shape[0], 1000))
    return correct / images.shape[0]


def serialized_bytes(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell()


def save_config(name, spec, work):
    """The model's hyperparameters and train section, from a Mnemo dump."""
    directory = os.path.join(ROOT, "build", "bench-compress-config")
    os.makedirs(directory, exist_ok=True)
    out = os.path.join(directory, name + ".json")
    dump = os.path.join(work, name + "-dump")
    interp = os.path.join(ROOT, "build", "bin", "mnemo-interp")
    subprocess.run([interp, os.path.join(ROOT, "examples", spec["file"]), "-D", "batch=2",
                    "--steps", "1", "--dump", dump], check=True, capture_output=True)
    config = json.load(open(os.path.join(dump, "config.json")))
    model_text = open(os.path.join(ROOT, "examples", spec["file"])).read()
    config["hyperparams"]["batch"] = int(re.search(r"batch = (\d+)", model_text).group(1))
    config["train"]["epochs"] = int(re.search(r"epochs = (\d+)", model_text).group(1))
    json.dump(config, open(out, "w"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--methods",
                        default="dense,unstructured,2:4,qat-int8,ptq-int8,ptq-int4")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--json")
    args = parser.parse_args()
    global TEST_SET
    train_set, test_set = load_idx("train"), load_idx("t10k")
    TEST_SET = test_set
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            spec = MODELS_UNDER_TEST[name]
            save_config(name, spec, work)
            for method in args.methods.split(","):
                ours = run_mnemo(name, spec, method, work, args.threads)
                # Post-training quantization changes no training: PyTorch's
                # side is its dense run (and quantize_dynamic).
                theirs = (None if method.startswith("ptq") else
                          run_pytorch(name, spec, method, args.threads, train_set, test_set))
                rows.append({"model": name, "method": method, "mnemo": ours, "pytorch": theirs})
                print(f"{name} {method}: Mnemo {ours['accuracy']:.4f} "
                      f"(export {ours['export_accuracy']:.4f}) PyTorch "
                      f"{theirs['accuracy'] if theirs else float('nan'):.4f}",
                      file=sys.stderr, flush=True)
    dense = {r["model"]: r for r in rows if r["method"] == "dense"}
    print("| model | method | sparsity | Mnemo accuracy | Δ vs dense | Mnemo export's accuracy | "
          "PyTorch accuracy | Δ vs dense | Mnemo checkpoint (params, masks, ranges) | "
          "Mnemo --export | PyTorch state_dict | Mnemo s | PyTorch s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in list(rows):
        if r["pytorch"] and "dynamic_accuracy" in r["pytorch"]:
            rows.append({"model": r["model"], "method": "quantize_dynamic int8 (of dense)",
                         "mnemo": None,
                         "pytorch": {"accuracy": r["pytorch"]["dynamic_accuracy"],
                                     "model_bytes": r["pytorch"]["dynamic_bytes"],
                                     "sparsity": 0.0, "seconds": 0}})
    for r in sorted(rows, key=lambda r: r["model"]):
        base = dense.get(r["model"])
        ours, theirs = r["mnemo"], r["pytorch"]

        def delta(who, key="accuracy"):
            return (f"{100 * (r[who][key] - base[who]['accuracy']):+.2f} pt"
                    if base and r[who] else "")
        sparsity = (ours or theirs)["sparsity"]
        cells = [r["model"], r["method"], f"{100 * sparsity:.1f}%",
                 f"{ours['accuracy']:.4f}" if ours else "", delta("mnemo"),
                 f"{ours['export_accuracy']:.4f} ({delta('mnemo', 'export_accuracy')})"
                 if ours else "",
                 f"{theirs['accuracy']:.4f}" if theirs else "", delta("pytorch"),
                 f"{ours['model_bytes'] / 1024:.0f} KiB" if ours else "",
                 f"{ours['export_bytes'] / 1024:.0f} KiB" if ours else "",
                 f"{theirs['model_bytes'] / 1024:.0f} KiB" if theirs else "",
                 f"{ours['seconds']:.0f}" if ours else "",
                 f"{theirs['seconds']:.0f}" if theirs and theirs["seconds"] else ""]
        print("| " + " | ".join(cells) + " |")
    # Inference: Mnemo's forward-only plan on the export, next to PyTorch's
    # dense model and its quantize_dynamic conversion.
    print()
    print("| model | method | Mnemo inference accuracy | Mnemo plan: weights | "
          "Mnemo plan: total | Mnemo ms/batch | PyTorch ms/batch |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in sorted(rows, key=lambda r: r["model"]):
        ours, theirs = r["mnemo"], r["pytorch"]
        if ours is None:
            torch_ms = theirs.get("inference_ms") if theirs else None
            cells = [r["model"], r["method"], f"{theirs['accuracy']:.4f} (PyTorch)", "", "", "",
                     f"{dense[r['model']]['pytorch']['dynamic_inference_ms']:.3f}"]
        else:
            torch_ms = theirs.get("inference_ms") if theirs else None
            cells = [r["model"], r["method"], f"{ours['inference_accuracy']:.4f}",
                     f"{ours['inference_weight_bytes'] / 1024:.0f} KiB",
                     f"{ours['inference_plan_bytes'] / 1024:.0f} KiB",
                     f"{ours['inference_ms']:.3f}",
                     f"{torch_ms:.3f}" if torch_ms else ""]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
