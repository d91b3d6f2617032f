#!/usr/bin/env python3
"""Writes the damaged inputs the robustness tests feed the trainer and the
inference program, from good files of the same run.

Usage: make_bad_files.py KIND OUT [IN]
  overlap, duplicate, gap    safetensors files whose data offsets overlap,
                             whose header repeats a key, whose data has a
                             byte no tensor owns (from IN, a checkpoint)
  nan, negative              IN with a NaN in its first parameter, or a
                             negative element in a second moment
  transposed, rank3          IN (an export) with fc1.weight stored
                             transposed [784,512], or as [512,784,1]
  last-step                  IN (a checkpoint) at step 2^63 - 1, after
                             which no step can be counted
  idx-labels-200             an IDX labels file whose first label is 200
"""
import gzip
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import safetensors_numpy  # noqa: E402


def raw_header(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = f.read(size)
        return header, f.read()


def write_raw(path, header_text, data):
    header = header_text.encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    src = sys.argv[3] if len(sys.argv) > 3 else None
    if kind in ("overlap", "duplicate", "gap"):
        header, data = raw_header(src)
        entries = json.loads(header)
        names = [k for k in entries if k != "__metadata__"]
        if kind == "overlap":
            # The second tensor starts inside the first one's bytes.
            first, second = entries[names[0]], entries[names[1]]
            length = second["data_offsets"][1] - second["data_offsets"][0]
            start = first["data_offsets"][0]
            second["data_offsets"] = [start, start + length]
            write_raw(out, json.dumps(entries), data)
        elif kind == "gap":
            write_raw(out, json.dumps(entries), data + b"\0" * 8)
        else:
            # The first tensor's entry written twice.
            text = json.dumps(entries)
            name = names[0]
            entry = json.dumps({name: entries[name]})[1:-1]
            write_raw(out, "{" + entry + ", " + text[1:], data)
    elif kind in ("nan", "negative", "transposed", "rank3", "last-step"):
        tensors, meta = safetensors_numpy.load(src)
        if kind == "last-step":
            meta["step"] = str(2**63 - 1)
        elif kind == "nan":
            name = next(k for k in tensors if k.endswith("weight"))
            tensors[name] = tensors[name].copy()
            tensors[name].flat[7] = np.nan
        elif kind == "negative":
            name = next(k for k in tensors if k.endswith(".exp_avg_sq"))
            tensors[name] = tensors[name].copy()
            tensors[name].flat[3] = -1.0
        elif kind == "transposed":
            tensors["fc1.weight"] = np.ascontiguousarray(tensors["fc1.weight"].T)
        else:
            tensors["fc1.weight"] = tensors["fc1.weight"].reshape(
                tensors["fc1.weight"].shape + (1,))
        safetensors_numpy.save(out, tensors, meta)
    elif kind == "idx-labels-200":
        labels = bytes([200] + [1] * 99)
        with gzip.open(out, "wb") as f:
            f.write(struct.pack(">II", 0x00000801, len(labels)) + labels)
    else:
        raise SystemExit(f"unknown kind {kind}")


if __name__ == "__main__":
    main()
