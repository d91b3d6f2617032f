#!/usr/bin/env python3
"""Checks a mnemo-interp training log: the mean loss falls every epoch and the
test accuracy is well above chance. Prints what it read."""
import re
import sys

text = open(sys.argv[1]).read()
print(text, end="")
losses = [float(m) for m in re.findall(r"epoch \d+  mean loss ([0-9.]+)", text)]
accuracy = re.search(r"accuracy ([0-9.]+)", text)
if len(losses) < 2:
    sys.exit("check_training: fewer than two epochs in the log")
for before, after in zip(losses, losses[1:]):
    if not after < before:
        sys.exit(f"check_training: the loss did not fall: {losses}")
if not accuracy or float(accuracy.group(1)) < 0.5:
    sys.exit("check_training: the test accuracy is not above 0.5")
print(f"loss fell {losses[0]:.3f} -> {losses[-1]:.3f}; test accuracy {accuracy.group(1)}")
