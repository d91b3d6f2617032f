#!/usr/bin/python3
"""Turns text files into byte-level token files for the GPT example.

Usage: make-tokens.py OUT_DIR [TEXT_FILE_OR_DIR ...]

Every byte is one token (vocabulary 256), as in char-level nanoGPT. The text
is concatenated in sorted file order; the first 90% becomes OUT_DIR/train.bin
and the rest OUT_DIR/val.bin, both as little-endian uint16 (the raw format
nanoGPT writes; llm.c's headered files are read too). Without inputs, the
plain-text fortune files of Debian's `fortunes` package (about 2.5 MB of
English) are used: a stand-in for tiny-shakespeare that needs no network.
"""
import os
import sys

import numpy as np

DEFAULT = "/usr/share/games/fortunes"


def text_files(paths):
    for path in paths:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                full = os.path.join(path, name)
                # Fortune databases: skip the index (.dat) and the links.
                if name.endswith(".dat") or os.path.islink(full) or not os.path.isfile(full):
                    continue
                yield full
        else:
            yield path


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    inputs = sys.argv[2:] or [DEFAULT]
    data = bytearray()
    for path in text_files(inputs):
        with open(path, "rb") as f:
            data += f.read()
    if len(data) < 1024:
        sys.exit(f"make-tokens.py: only {len(data)} bytes of text in {inputs}")
    tokens = np.frombuffer(bytes(data), dtype=np.uint8).astype("<u2")
    split = len(tokens) * 9 // 10
    os.makedirs(out, exist_ok=True)
    tokens[:split].tofile(os.path.join(out, "train.bin"))
    tokens[split:].tofile(os.path.join(out, "val.bin"))
    print(f"{len(tokens)} tokens: {split} in {out}/train.bin, "
          f"{len(tokens) - split} in {out}/val.bin")


if __name__ == "__main__":
    main()
