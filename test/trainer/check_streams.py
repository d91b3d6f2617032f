"""Checks a --streams run of test/trainer/lstm-streams.test: in the recorded
batches, row b of batch s + 1 starts where row b of batch s ended (its first
token is the last target before it), and the checkpoint holds the LSTM's
carried state, which training left nonzero."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import safetensors_numpy  # noqa: E402

dump, checkpoint = sys.argv[1], sys.argv[2]
batches, _ = safetensors_numpy.load(os.path.join(dump, "batches.safetensors"))
steps = 0
while f"tokens.{steps + 1}" in batches:
    steps += 1
for s in range(1, steps):
    tokens, following = batches[f"next.{s}"], batches[f"tokens.{s + 1}"]
    if not np.array_equal(tokens[:, -1], following[:, 0]):
        sys.exit(f"batch {s + 1} does not continue batch {s}")
print(f"rows continue across {steps} batches")
tensors, _ = safetensors_numpy.load(checkpoint)
state = sorted(name for name in tensors if name.endswith("_state"))
nonzero = all(np.abs(tensors[name]).max() > 0 for name in state)
print("carried state:", " ".join(state) + ",", "nonzero" if nonzero else "ZERO")
