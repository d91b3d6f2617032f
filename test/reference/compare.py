#!/usr/bin/env python3
"""Replays a Mnemo training run in PyTorch and compares the results.

Usage: compare.py DUMP_DIR [--rtol R] [--atol A]

DUMP_DIR is what `mnemo-interp MODEL.mn --steps N --dump DUMP_DIR` wrote: the
initial weights, the batches, the weights after N steps, the losses and the
settings. This script builds the same model in PyTorch (models.py), loads the
same initial weights, runs the same optimizer, schedule and clipping on the
same batches, and checks that every loss and every parameter matches.
Exits 1 on a mismatch.

A run made with `mnemo-interp --exact` computed in float64; PyTorch then runs
in float64 too, and the match must be close to exact. An f32 run is compared
with PyTorch in f32, with `--atol` as a fraction of one step of the learning
rate: where a gradient is as small as Adam's eps (1e-8), the step taken
depends on the last bits of the gradient, which f32 summation order alone
changes (see docs/training.md).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_numpy  # noqa: E402
from models import MODELS  # noqa: E402


def make_optimizer(settings, params):
    kind = settings["kind"]
    if kind in ("adam", "adamw"):
        cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
        return cls(params, lr=settings["lr"], betas=tuple(settings["betas"]),
                   eps=settings["eps"], weight_decay=settings["weight_decay"])
    if kind == "sgd":
        return torch.optim.SGD(params, lr=settings["lr"], momentum=settings["momentum"],
                               dampening=settings["dampening"],
                               weight_decay=settings["weight_decay"],
                               nesterov=settings["nesterov"])
    raise SystemExit(f"compare.py: optimizer {kind} is not handled")


class FakeQuantized(torch.nn.Module):
    """A `quantize ... = qat(...)` directive on one parameter, as PyTorch's
    FakeQuantize with the matching observer (torch.ao.quantization)."""

    def __init__(self, settings, weight):
        super().__init__()
        from torch.ao import quantization as tq
        per_channel = settings["granularity"] == "per_channel" and weight.dim() >= 2
        symmetric = settings["scheme"] == "symmetric"
        moving = settings["observer"] == "moving_average"
        if per_channel:
            observer = (tq.MovingAveragePerChannelMinMaxObserver if moving
                        else tq.PerChannelMinMaxObserver)
            scheme = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
            extra = {"ch_axis": 0}
        else:
            observer = tq.MovingAverageMinMaxObserver if moving else tq.MinMaxObserver
            scheme = torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine
            extra = {}
        bits = settings["bits"]
        self.fake_quant = tq.FakeQuantize(observer=observer, quant_min=-(1 << (bits - 1)),
                                          quant_max=(1 << (bits - 1)) - 1, dtype=torch.qint8,
                                          qscheme=scheme, **extra)

    def forward(self, weight):
        return self.fake_quant(weight)


def apply_qat(model, train):
    """Registers the train section's qat directives as parametrizations."""
    from torch.nn.utils import parametrize
    for directive in train.get("quantize", []):
        if directive["kind"] != "qat":
            raise SystemExit(f"compare.py: quantize '{directive['kind']}' is not handled")
        for name in directive["params"]:
            owner, attr = name.rsplit(".", 1)
            module = model.get_submodule(owner)
            parametrize.register_parametrization(
                module, attr, FakeQuantized(directive, getattr(module, attr)))


def trained_parameters(model):
    """Parameters by Mnemo's names (a parametrized weight by its original)."""
    return {name.replace("parametrizations.", "").replace(".original", ""): p
            for name, p in model.named_parameters()}


def lr_schedule(train, total_steps):
    """The learning rate at each step (from 1) of the train section's
    schedule, as Mnemo's lr_schedule op computes it; `total_steps` is the
    run's length, which a cosine schedule with `steps = 0` decays over."""
    base_lr = train["optimizer"]["lr"]
    schedule = train.get("schedule")

    def lr_at(step):
        if schedule and schedule.get("warmup", 0) > 0 and step <= schedule["warmup"]:
            return base_lr * step / schedule["warmup"]
        if schedule and schedule["kind"] == "cosine":
            warmup = schedule.get("warmup", 0)
            horizon = schedule.get("steps", 0) or total_steps
            progress = min(1.0, max(0.0, (step - warmup) / max(1.0, horizon - warmup)))
            min_lr = schedule.get("min_lr", 0.0)
            return min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
        return base_lr

    return lr_at


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=None,
                        help="default: 1e-12 for f64 runs, 1%% of the learning rate for f32")
    args = parser.parse_args()

    with open(os.path.join(args.dump, "config.json")) as f:
        config = json.load(f)
    init, _ = safetensors_numpy.load(os.path.join(args.dump, "init.safetensors"))
    batches, _ = safetensors_numpy.load(os.path.join(args.dump, "batches.safetensors"))
    final, _ = safetensors_numpy.load(os.path.join(args.dump, "final.safetensors"))
    losses, _ = safetensors_numpy.load(os.path.join(args.dump, "losses.safetensors"))

    torch.manual_seed(0)
    torch.set_num_threads(1)
    wide = config.get("precision") == "f64"
    if args.atol is None:
        args.atol = 1e-12 if wide else 1e-2 * config["train"]["optimizer"]["lr"]
    model = MODELS[config["model"]](config["hyperparams"])
    if wide:
        model = model.double()
    state = model.state_dict()
    missing = set(state) ^ set(init)
    if missing:
        raise SystemExit(f"compare.py: parameter names differ: {sorted(missing)}")
    model.load_state_dict({k: torch.from_numpy(v).to(torch.float64 if wide else torch.float32)
                           for k, v in init.items()})

    train = config["train"]
    total = config["steps"]
    apply_qat(model, train)
    optimizer = make_optimizer(train["optimizer"], model.parameters())

    lr_at = lr_schedule(train, total)

    torch_losses = []
    for step in range(1, total + 1):
        batch = {}
        for name in config["batch"]:
            t = torch.from_numpy(batches[f"{name}.{step}"])
            batch[name] = t.double() if wide and t.is_floating_point() else t
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        optimizer.zero_grad()
        loss = model(batch)
        loss.backward()
        if "clip_grad_norm" in train:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["clip_grad_norm"])
        optimizer.step()
        torch_losses.append(loss.item())

    failures = 0
    mnemo_losses = losses["loss"]
    print(f"{config['model']} in {'f64' if wide else 'f32'}: {total} steps of "
          f"{train['optimizer']['kind']}, rtol {args.rtol}, atol {args.atol:g}")
    for step, (ours, theirs) in enumerate(zip(mnemo_losses, torch_losses), 1):
        ok = math.isclose(ours, theirs, rel_tol=args.rtol, abs_tol=args.atol)
        failures += not ok
        print(f"  step {step}: loss mnemo {ours:.7f}  pytorch {theirs:.7f}  {'ok' if ok else 'MISMATCH'}")
    worst = 0.0
    for name, tensor in trained_parameters(model).items():
        theirs = tensor.detach().numpy()
        ours = final[name]
        ok = np.allclose(ours, theirs, rtol=args.rtol, atol=args.atol)
        rel = np.max(np.abs(ours - theirs) / (np.abs(theirs) + args.atol))
        worst = max(worst, rel)
        if not ok:
            failures += 1
            print(f"  {name}: MISMATCH, max relative difference {rel:.3g}")
    print(f"  {len(final)} parameters, worst relative difference {worst:.3g}")
    print("PASS" if failures == 0 else f"FAIL: {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
