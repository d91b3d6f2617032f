#!/usr/bin/env python3
"""Checks `train --export` against the checkpoint of the same run.

Usage: check_export.py CHECKPOINT EXPORT

- int8/int4 weights: the scale and zero point equal what PyTorch's observer
  (torch.ao.quantization) computes from the same range (QAT: the
  checkpoint's observed range; post-training: the weight's own, per channel
  or per group), and (q - zero_point) * scale equals
  torch.fake_quantize_per_channel_affine of the checkpoint's weight exactly:
  inference reads the weights the fake-quantized forward trained with;
- 2:4-packed, row-pruned and CSR weights: unpacked, they equal the
  checkpoint's weight exactly (zeros where pruned);
- every other parameter is the checkpoint's.
Prints each weight's format and the bytes, then PASS or FAIL.
"""
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_numpy  # noqa: E402


def shape_of(layout):
    return [int(d) for d in re.search(r"shape \[([0-9,]*)\]", layout).group(1).split(",")]


def dequantize(name, layout, exported, weight):
    """(q - zero_point) * scale, and PyTorch's fake quantization of the
    weight with the same parameters; the weight is read as [C, -1], one
    range per row (a channel, or a group of a row)."""
    bits = int(re.match(r"int(\d+)", layout).group(1))
    qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    q = exported[name]
    if bits == 4:
        nibbles = np.stack([q & 0xF, q >> 4], axis=1).reshape(-1)[:weight.size]
        q = np.where(nibbles > 7, nibbles.astype(np.int32) - 16, nibbles).astype(np.int8)
    scale, zero = exported[name + ".scale"], exported[name + ".zero_point"]
    rows = weight.reshape(len(scale), -1)
    q = q.reshape(rows.shape).astype(np.float32)
    ours = ((q - zero.astype(np.float32)[:, None]) * scale[:, None]).astype(np.float32)
    theirs = torch.fake_quantize_per_channel_affine(
        torch.from_numpy(rows), torch.from_numpy(scale), torch.from_numpy(zero), 0, qmin, qmax)
    return ours, theirs.numpy(), rows, (qmin, qmax, "symmetric" in layout)


def pytorch_qparams(rows, lo, hi, qmin, qmax, symmetric):
    """PyTorch's per-channel observer's scale and zero point: fed the
    trained range (lo, hi), or observing the rows themselves."""
    from torch.ao import quantization as tq
    observer = tq.PerChannelMinMaxObserver(
        ch_axis=0, dtype=torch.qint8, quant_min=qmin, quant_max=qmax,
        qscheme=torch.per_channel_symmetric if symmetric else torch.per_channel_affine)
    if lo is None:
        observer(torch.from_numpy(rows))
    else:
        observer.min_val = torch.from_numpy(lo.reshape(-1))
        observer.max_val = torch.from_numpy(hi.reshape(-1))
    scale, zero = observer.calculate_qparams()
    return scale.numpy().reshape(-1), zero.numpy().reshape(-1)


def unpacked(name, layout, exported):
    """An exported weight as the dense f32 tensor it stands for (int8/int4:
    dequantized; 2:4, kept rows, CSR: zeros where pruned)."""
    shape = shape_of(layout)
    if layout.startswith("int"):
        return dequantize(name, layout, exported, np.zeros(shape, np.float32))[0].reshape(shape)
    if layout.startswith("2:4"):
        rows, k = shape[0], int(np.prod(shape[1:]))
        values = exported[name].reshape(-1, 2)
        indices = exported[name + ".indices"].reshape(-1)
        groups = np.stack([indices & 0xF, indices >> 4], axis=1).reshape(-1)
        dense = np.zeros((rows * k // 4, 4), np.float32)
        for j in range(2):
            dense[np.arange(len(groups)), (groups >> (2 * j)) & 3] = values[:, j]
        return dense.reshape(shape)
    if layout.startswith("rows kept"):
        dense = np.zeros(shape, np.float32)
        dense[exported[name + ".rows"]] = exported[name]
        return dense
    if layout.startswith("CSR"):
        rows, k = shape[0], int(np.prod(shape[1:]))
        dense = np.zeros((rows, k), np.float32)
        offsets = exported[name + ".row_offsets"]
        columns = exported[name + ".columns"].astype(np.int64)
        for r in range(rows):
            dense[r, columns[offsets[r]:offsets[r + 1]]] = \
                exported[name + ".values"][offsets[r]:offsets[r + 1]]
        return dense.reshape(shape)
    return exported[name]


def main():
    checkpoint, _ = safetensors_numpy.load(sys.argv[1])
    exported, metadata = safetensors_numpy.load(sys.argv[2])
    failures, dense_bytes, export_bytes = 0, 0, sum(t.nbytes for t in exported.values())
    params = [k for k in checkpoint if not re.search(
        r"\.(exp_avg|exp_avg_sq|momentum_buffer|mask|observer)(\.|$)", k)]
    for name in sorted(params):
        weight = checkpoint[name]
        dense_bytes += weight.nbytes
        layout = metadata.get(name, "dense")
        if layout.startswith("int"):
            ours, theirs, rows, (qmin, qmax, symmetric) = dequantize(
                name, layout, exported, weight)
            trained = "trained" in layout
            scale, zero = pytorch_qparams(
                rows, checkpoint.get(name + ".observer.min") if trained else None,
                checkpoint.get(name + ".observer.max") if trained else None,
                qmin, qmax, symmetric)
            if not (np.array_equal(scale, exported[name + ".scale"])
                    and np.array_equal(zero, exported[name + ".zero_point"])):
                print(f"FAIL: {name}'s scale or zero point differs from PyTorch's observer")
                failures += 1
            if not np.array_equal(ours, theirs):
                print(f"FAIL: {name}: {np.sum(ours != theirs)} dequantized values differ "
                      "from the fake-quantized forward")
                failures += 1
        elif layout != "dense":
            if not np.array_equal(unpacked(name, layout, exported), weight):
                print(f"FAIL: {name}: the {layout.split(',')[0]} weight unpacked "
                      "differs from the checkpoint")
                failures += 1
        elif not np.array_equal(exported[name], weight):
            print(f"FAIL: {name} differs from the checkpoint")
            failures += 1
        print(f"{name:<14} {layout.split(',')[0]}")
    print(f"parameters: {dense_bytes} bytes dense, {export_bytes} exported, "
          f"{dense_bytes / export_bytes:.2f}x smaller")
    print("FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
