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

Quantization-aware training turns last-bit differences into whole
quantization steps: a weight on a rounding boundary takes either code, and
at a range's end keeps or loses its straight-through gradient. Such a
weight may differ beyond the tolerance by no more than its Adam steps can
move it, at most two per quantization range; with --flip-rtol, a bounded
number of steps (--flip-steps) may have losses that differ by up to one
flipped code's effect.

--drift K also trains in float64 and requires Mnemo's mean parameter
difference from PyTorch's f32 to be at most K times PyTorch's own f32
difference from f64.

A bf16 run (mnemoc or mnemo-interp --precision=bf16) is replayed as a
PyTorch user trains in bf16: f32 parameters and optimizer, the forward
under torch.autocast("cpu", torch.bfloat16). Two bf16 computations agree
only to bf16's rounding, and which ops round differs a little between the
two policies (docs/mixed-precision.md), so the losses get rtol 1e-2, and
each parameter tensor a drift check: its mean difference from PyTorch's
bf16 run at most K (--drift, default 3) times that run's own mean
difference from PyTorch's f32 run, plus --atol. An f16 run (loss scaling)
is refused: PyTorch 1.13 has no f16 autocast on the CPU.
"""
import contextlib
import argparse
import json
import math
import os
import sys

import numpy as np

# ONEDNN_MAX_CPU_ISA makes the suite run Mnemo's trainers as on another
# CPU; PyTorch is the reference and runs as on this one. Limited below
# the ISA it sees (AVX2 on an AVX-512 CPU), 1.13 still asks oneDNN for
# bf16 kernels that it then lacks, and fails; a real AVX2 CPU takes
# PyTorch's own bf16 kernels instead (as amp_dtypes.py says).
os.environ.pop("ONEDNN_MAX_CPU_ISA", None)
os.environ.pop("DNNL_MAX_CPU_ISA", None)
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_numpy  # noqa: E402
from models import MODELS  # noqa: E402


def make_optimizer(settings, params):
    kind = settings["kind"]
    if settings.get("decay_params", "all") == "matrices":
        # nanoGPT's two groups: weight decay on the parameters of two or more
        # dimensions only.
        params = list(params)
        groups = [[p for p in params if p.dim() >= 2],
                  [p for p in params if p.dim() < 2]]
        params = [{"params": g, "weight_decay": settings["weight_decay"] if i == 0 else 0.0}
                  for i, g in enumerate(groups) if g]
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


def is_observer(name):
    """A quantization observer's range: Mnemo keeps it as a buffer of the
    weight it observes, PyTorch inside the parametrization's FakeQuantize."""
    return ".observer." in name


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


def autocast(compute):
    """The context a forward runs in: bf16 autocast for a bf16 run."""
    if compute == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def replay(config, init, batches, compute):
    """Trains the dump's model in PyTorch from its initial weights on its
    batches, computing in `compute` ("f32", "f64", or "bf16": f32 parameters
    under autocast): (the losses, the trained parameters by Mnemo's
    names)."""
    wide = compute == "f64"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = MODELS[config["model"]](config["hyperparams"])
    if wide:
        model = model.double()
    state = model.state_dict()
    missing = set(state) ^ {name for name in init if not is_observer(name)}
    if missing:
        raise SystemExit(f"compare.py: parameter and buffer names differ: {sorted(missing)}")
    # Floats in the run's precision; integer buffers (BatchNorm's
    # num_batches_tracked, int64 in PyTorch) in PyTorch's type.
    model.load_state_dict({
        k: torch.from_numpy(v).to(state[k].dtype if not state[k].is_floating_point()
                                  else torch.float64 if wide else torch.float32)
        for k, v in init.items() if k in state})

    train = config["train"]
    total = config["steps"]
    buffers = [name for name, _ in model.named_buffers()]
    apply_qat(model, train)
    optimizer = make_optimizer(train["optimizer"], model.parameters())
    lr_at = lr_schedule(train, config.get("total_steps", total))

    losses = []
    for step in range(1, total + 1):
        batch = {}
        for name in config["batch"]:
            t = torch.from_numpy(batches[f"{name}.{step}"])
            batch[name] = t.double() if wide and t.is_floating_point() else t
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        optimizer.zero_grad()
        with autocast(compute):
            loss = model(batch)
        loss.backward()
        if "clip_grad_norm" in train:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train["clip_grad_norm"])
        optimizer.step()
        losses.append(loss.item())
    # Evaluation, as Mnemo's eval_step: model.eval() (running statistics, no
    # dropout) on the last batch, with quantization ranges as training left
    # them (a FakeQuantize observes in eval mode too unless disabled).
    model.eval()
    from torch.ao import quantization as tq
    model.apply(tq.disable_observer)
    with torch.no_grad(), autocast(compute):
        eval_loss = model(batch).item() if total else None
    trained = {name: p.detach().numpy() for name, p in trained_parameters(model).items()}
    # The model's own buffers (running statistics), not the observers'.
    named = dict(model.named_buffers())
    trained.update({name: named[name].numpy() for name in buffers})
    return losses, trained, eval_loss


def adam_bound(train, steps, total_steps):
    """How far one element's value can move in `steps` Adam(W) steps of the
    train section's schedule over `total_steps`, whatever its gradients: |m_hat / sqrt(v_hat)|
    is at most (1 - b1) / (1 - b1^t) * sqrt((1 - b2^t) / (1 - b2)) *
    sqrt(sum_k (b1^2 / b2)^k) by Cauchy-Schwarz over the gradients' history
    (eps only shortens a step, AdamW's decay only shrinks differences).
    None for optimizers without such a bound (SGD)."""
    opt = train["optimizer"]
    if opt["kind"] not in ("adam", "adamw"):
        return None
    b1, b2 = opt["betas"]
    lr_at = lr_schedule(train, total_steps)
    total, geometric = 0.0, 0.0
    for t in range(1, steps + 1):
        geometric += (b1 * b1 / b2) ** (t - 1)
        ratio = (1 - b1) / (1 - b1 ** t) * math.sqrt((1 - b2 ** t) / (1 - b2)) * math.sqrt(geometric)
        total += lr_at(t) * ratio
    return total


def quantization_ranges(train, name, shape):
    """The number of ranges (scales) a qat directive gives parameter `name`
    (its output channels, or one), or 0 when no qat directive names it."""
    for directive in train.get("quantize", []):
        if directive.get("kind") == "qat" and name in directive["params"]:
            per_channel = directive["granularity"] == "per_channel" and len(shape) >= 2
            return shape[0] if per_channel else 1
    return 0


def compare_exactly(name, final, theirs):
    """What needs no tolerance: Mnemo's final state has the tensor, and an
    integer one (a counter, such as BatchNorm's num_batches_tracked) is
    equal. Returns (done, failed): done when nothing is left to compare."""
    if name not in final:
        print(f"  {name}: MISSING from Mnemo's final state")
        return True, True
    if np.issubdtype(theirs.dtype, np.floating):
        return False, False
    ours = final[name]
    same = np.array_equal(ours.astype(np.int64), theirs.astype(np.int64))
    if not same:
        print(f"  {name}: MISMATCH, {ours} and {theirs}")
    return True, not same


def compare_bf16_parameters(config, init, batches, final, torch_params, k, atol):
    """A bf16 run's parameters, tensor by tensor: the mean difference from
    PyTorch's bf16 run at most k times that run's own mean difference from
    its f32 run, plus atol (a tensor that bf16 leaves alone must match as
    f32 does). Element by element says little here: where bf16 rounds a
    gradient as small as Adam's eps, the step goes either way. Returns the
    number of mismatches."""
    _, f32_params, _ = replay(config, init, batches, "f32")
    failures = 0
    worst = 0.0
    for name, theirs in torch_params.items():
        done, failed = compare_exactly(name, final, theirs)
        failures += failed
        if done:
            continue
        ours = final[name].astype(np.float64)
        ours_mean = float(np.mean(np.abs(ours - theirs)))
        own_mean = float(np.mean(np.abs(theirs.astype(np.float64) - f32_params[name])))
        ratio = ours_mean / (own_mean + atol)
        worst = max(worst, ratio)
        if ours_mean > k * own_mean + atol:
            failures += 1
            print(f"  {name}: MISMATCH, mean difference from pytorch bf16 {ours_mean:.3g}, "
                  f"pytorch bf16 from f32 {own_mean:.3g} (at most {k:g}x)")
    print(f"  {len(final)} parameters: mean difference from pytorch bf16 at most "
          f"{worst:.2g}x pytorch's own bf16-vs-f32 difference (plus atol; at most {k:g}x)")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("--rtol", type=float, default=None,
                        help="default: 1e-4, or 1e-2 for a bf16 run")
    parser.add_argument("--atol", type=float, default=None,
                        help="default: 1e-12 for f64 runs, 1%% of the learning rate for f32")
    parser.add_argument("--flip-rtol", type=float, default=None,
                        help="quantization-aware training: a loss may differ up to this much "
                             "on at most --flip-steps steps, after a code flipped on a rounding "
                             "boundary")
    parser.add_argument("--flip-steps", type=int, default=0)
    parser.add_argument("--drift", type=float, default=None, metavar="K",
                        help="also train in float64, and require the mean parameter "
                             "difference from PyTorch's f32 to be at most K times PyTorch's "
                             "own f32-vs-f64 difference (a bf16 run: per tensor, against "
                             "PyTorch's bf16-vs-f32 difference; default 3)")
    args = parser.parse_args()

    with open(os.path.join(args.dump, "config.json")) as f:
        config = json.load(f)
    init, _ = safetensors_numpy.load(os.path.join(args.dump, "init.safetensors"))
    batches, _ = safetensors_numpy.load(os.path.join(args.dump, "batches.safetensors"))
    final, _ = safetensors_numpy.load(os.path.join(args.dump, "final.safetensors"))
    losses, _ = safetensors_numpy.load(os.path.join(args.dump, "losses.safetensors"))

    precision = config.get("precision", "f32")
    if precision not in ("f32", "f64", "bf16"):
        raise SystemExit(f"compare.py: this run computed in {precision}; PyTorch 1.13 has "
                         f"no {precision} autocast on the CPU to replay it with (compare "
                         f"its f32 or bf16 run)")
    wide = precision == "f64"
    half = precision == "bf16"
    if args.rtol is None:
        # bf16 keeps 8 significant bits (a rounding moves a value by up to
        # 2^-9 = 2e-3); the loss is an f32 reduction of such values, and
        # 1e-2 allows a few roundings' worth of difference between the two
        # policies. f32 runs agree to summation order.
        args.rtol = 1e-2 if half else 1e-4
    if args.atol is None:
        args.atol = 1e-12 if wide else 1e-2 * config["train"]["optimizer"]["lr"]
    train = config["train"]
    total = config["steps"]
    torch_losses, torch_params, torch_eval_loss = replay(config, init, batches, precision)

    failures = 0
    mnemo_losses = losses["loss"]
    print(f"{config['model']} in {precision}"
          f"{' (PyTorch under bf16 autocast)' if half else ''}: {total} steps of "
          f"{train['optimizer']['kind']}, rtol {args.rtol}, atol {args.atol:g}")
    flipped = 0
    for step, (ours, theirs) in enumerate(zip(mnemo_losses, torch_losses), 1):
        ok = math.isclose(ours, theirs, rel_tol=args.rtol, abs_tol=args.atol)
        verdict = "ok" if ok else "MISMATCH"
        if (not ok and args.flip_rtol is not None and flipped < args.flip_steps and
                math.isclose(ours, theirs, rel_tol=args.flip_rtol, abs_tol=args.atol)):
            ok, verdict = True, f"ok within {args.flip_rtol:g} (a code flipped)"
            flipped += 1
        failures += not ok
        print(f"  step {step}: loss mnemo {ours:.7f}  pytorch {theirs:.7f}  {verdict}")
    if "eval_loss" in losses and torch_eval_loss is not None:
        ours = float(losses["eval_loss"][0])
        ok = math.isclose(ours, torch_eval_loss, rel_tol=args.rtol, abs_tol=args.atol)
        failures += not ok
        print(f"  eval: loss mnemo {ours:.7f}  pytorch {torch_eval_loss:.7f}  "
              f"{'ok' if ok else 'MISMATCH'}")
    if half:
        failures += compare_bf16_parameters(config, init, batches, final, torch_params,
                                            args.drift or 3.0, args.atol)
        print("PASS" if failures == 0 else f"FAIL: {failures} mismatches")
        return 1 if failures else 0
    worst = 0.0
    # A fake-quantized weight whose value lands on a rounding boundary (x /
    # scale = 127.5 at a range's end) keeps or loses its straight-through
    # gradient on a last-bit difference of the f32 sums before it, which
    # the CPU's BLAS kernel decides. Such an element then takes other Adam
    # steps than PyTorch's: it may differ beyond the tolerance, by no more
    # than its steps can move it, at most at both ends of each range.
    bound = None if wide else adam_bound(train, total, config.get("total_steps", total))
    # With --drift PyTorch trains in f64 too. An element whose gradient is
    # as small as Adam's eps steps either way on the last bits of f32 sums,
    # which the CPU's BLAS kernel decides: where PyTorch's own f32 result is
    # beyond the tolerance from its f64 one, Mnemo's may differ from it by
    # as much as the element's Adam steps can move it. The drift check
    # below still bounds the mean over every element.
    wide_params = replay(config, init, batches, "f64")[1] if args.drift is not None else None
    for name, theirs in torch_params.items():
        done, failed = compare_exactly(name, final, theirs)
        failures += failed
        if done:
            continue
        ours = final[name]
        close = np.isclose(ours, theirs, rtol=args.rtol, atol=args.atol)
        rel = np.max(np.abs(ours - theirs) / (np.abs(theirs) + args.atol))
        far = int(np.count_nonzero(~close))
        ranges = quantization_ranges(train, name, list(theirs.shape))
        if far and ranges and bound is not None:
            largest = float(np.max(np.abs(ours - theirs)[~close]))
            if far <= 2 * ranges and largest <= 2 * bound + args.atol:
                print(f"  {name}: {far} of {theirs.size} elements beyond the tolerance, by at "
                      f"most {largest:.2g} (within their Adam steps' {2 * bound:.2g}): "
                      f"straight-through flips at a rounding boundary")
                rel = np.max((np.abs(ours - theirs) / (np.abs(theirs) + args.atol))[close],
                             initial=0.0)
                far = 0
        if far and wide_params is not None and bound is not None:
            unstable = ~np.isclose(theirs, wide_params[name], rtol=args.rtol, atol=args.atol)
            excused = ~close & unstable & (np.abs(ours - theirs) <= 2 * bound + args.atol)
            if excused.any():
                largest = float(np.max(np.abs(ours - theirs)[excused]))
                print(f"  {name}: {int(np.count_nonzero(excused))} of {theirs.size} elements "
                      f"beyond the tolerance where PyTorch's own f32 run is too (from its "
                      f"f64 run), by at most {largest:.2g} (within their Adam steps' "
                      f"{2 * bound:.2g})")
                rel = np.max((np.abs(ours - theirs) / (np.abs(theirs) + args.atol))[close],
                             initial=0.0)
                close |= excused
                far = int(np.count_nonzero(~close))
        worst = max(worst, rel)
        if far:
            failures += 1
            print(f"  {name}: MISMATCH, {far} of {theirs.size} elements, max relative "
                  f"difference {rel:.3g}")
    print(f"  {len(final)} parameters, worst relative difference {worst:.3g}")
    if args.drift is not None:
        # The mean absolute difference over every parameter element: the
        # largest is an element whose gradient is as small as eps, which
        # Adam moves by about lr either way on noise alone.
        def drift(a, b):
            diffs = np.concatenate([np.abs(a[n].astype(np.float64) - b[n]).ravel() for n in b])
            return float(diffs.mean()), float(diffs.max())
        ours_mean, ours_max = drift(final, torch_params)
        own_mean, own_max = drift(torch_params, wide_params)
        ok = ours_mean <= args.drift * own_mean
        failures += not ok
        print(f"  drift (mean |difference| of {sum(p.size for p in torch_params.values())} "
              f"elements): mnemo from pytorch f32 {ours_mean:.2g} (largest {ours_max:.2g}), "
              f"pytorch f32 from f64 {own_mean:.2g} (largest {own_max:.2g}); at most "
              f"{args.drift:g}x: {'ok' if ok else 'MISMATCH'}")
    print("PASS" if failures == 0 else f"FAIL: {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
