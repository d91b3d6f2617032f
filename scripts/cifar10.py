#!/usr/bin/env python3
"""Converts CIFAR-10's binary version into arrays the trainer reads.

Usage: scripts/cifar10.py SRC OUT

SRC is the extracted cifar-10-batches-bin directory: data_batch_1.bin to
data_batch_5.bin and test_batch.bin, each 10,000 records of one label byte
(0 to 9) and 3,072 pixel bytes (the red, green and blue 32x32 planes, rows
first). OUT gets train.safetensors (50,000 examples) and test.safetensors
(10,000), each with

    image  U8[N, 3, 32, 32]   channels first, as torchvision's ToTensor
    label  U8[N]

so a model with `input image: f32[batch, 3, 32, 32]` and `target label:
i32[batch]` trains on it with `train --data OUT` (the trainer scales the
bytes to [0, 1] and shuffles each epoch; see docs/trainer.md). Nothing is
overwritten: an existing output is an error. A file of the wrong size or a
label outside 0..9 is an error naming the file and the record.
"""
import json
import os
import struct
import sys

RECORD = 1 + 3 * 32 * 32
SPLITS = {"train": [f"data_batch_{k}.bin" for k in range(1, 6)],
          "test": ["test_batch.bin"]}


def fail(message):
    print(f"cifar10.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def read_split(src, files):
    labels, images = bytearray(), bytearray()
    for name in files:
        path = os.path.join(src, name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            fail(f"cannot read '{path}': {e.strerror} (SRC is the extracted "
                 "cifar-10-batches-bin directory)")
        if not data or len(data) % RECORD:
            fail(f"'{path}' holds {len(data)} bytes, not a whole number of "
                 f"{RECORD}-byte records (a label byte and 3x32x32 pixels)")
        for r in range(len(data) // RECORD):
            record = data[r * RECORD:(r + 1) * RECORD]
            if record[0] > 9:
                fail(f"'{path}', record {r}: label {record[0]} is not a class "
                     "0 to 9")
            labels.append(record[0])
            images += record[1:]
    return len(labels), bytes(images), bytes(labels)


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, shape, bytes). Written to a temporary file
    and renamed, so an interrupted run leaves no partial file."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    src, out = sys.argv[1], sys.argv[2]
    if not os.path.isdir(src):
        fail(f"'{src}' is not a directory (the extracted cifar-10-batches-bin)")
    targets = {split: os.path.join(out, f"{split}.safetensors") for split in SPLITS}
    for path in targets.values():
        if os.path.exists(path):
            fail(f"'{path}' exists; remove it or choose another OUT")
    os.makedirs(out, exist_ok=True)
    for split, files in SPLITS.items():
        count, images, labels = read_split(src, files)
        write_safetensors(targets[split], {
            "image": ("U8", [count, 3, 32, 32], images),
            "label": ("U8", [count], labels)})
        print(f"{targets[split]}: {count} examples")


if __name__ == "__main__":
    main()
