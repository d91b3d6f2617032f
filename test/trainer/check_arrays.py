#!/usr/bin/env python3
"""Checks the batches a trainer read from named arrays (arrays.test).

Usage: check_arrays.py ARRAYS BATCHES INPUT TARGET

ARRAYS is the .safetensors file of the training split (U8 images, integer
labels); BATCHES the `batches.safetensors` of the run's --dump (INPUT.k and
TARGET.k for each step k). Every example of every batch must be a row of
the arrays, its image scaled to [0, 1] with that row's label, and every
epoch must visit each row exactly once (when the row count is a multiple of
the batch). Prints a summary line, or FAIL and exits 1.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import safetensors_numpy  # noqa: E402


def main():
    arrays_path, batches_path, image_name, label_name = sys.argv[1:5]
    arrays, _ = safetensors_numpy.load(arrays_path)
    batches, _ = safetensors_numpy.load(batches_path)
    images, labels = arrays[image_name], arrays[label_name]
    rows = {images[r].tobytes(): r for r in range(len(images))}
    steps = sum(1 for key in batches if key.startswith(image_name + "."))
    batch = batches[f"{image_name}.1"].shape[0]
    per_epoch = len(images) // batch
    seen = []
    for step in range(1, steps + 1):
        got = batches[f"{image_name}.{step}"]
        got_labels = batches[f"{label_name}.{step}"]
        for b in range(batch):
            # The trainer scaled bytes to [0, 1] in f32: x * 255 is within a
            # rounding of the byte it came from.
            as_bytes = np.rint(got[b].astype(np.float64) * 255).astype(np.uint8)
            row = rows.get(as_bytes.tobytes())
            if row is None or not np.allclose(got[b], images[row] / np.float32(255), atol=1e-7):
                sys.exit(f"FAIL: step {step}, example {b} is no row of {arrays_path}")
            if int(got_labels[b]) != int(labels[row]):
                sys.exit(f"FAIL: step {step}, example {b} (row {row}) has label "
                         f"{int(got_labels[b])}, the arrays {int(labels[row])}")
            seen.append(row)
    for start in range(0, len(seen) - per_epoch * batch + 1, per_epoch * batch):
        epoch = seen[start:start + per_epoch * batch]
        if len(set(epoch)) != len(epoch):
            sys.exit("FAIL: an epoch visits a row twice")
    print(f"{steps} batches of {batch}: every example a row of the arrays, each row once an epoch")


if __name__ == "__main__":
    main()
