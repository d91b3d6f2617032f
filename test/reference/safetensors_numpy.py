"""Reads and writes .safetensors files with numpy alone (no extra package)."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
           "I64": np.int64, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def load(path):
    """Returns {name: ndarray} and the metadata dict."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=_DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors, metadata


def save(path, tensors, metadata=None):
    """Writes {name: ndarray} (and string metadata) in the layout Mnemo and
    the safetensors library write: data in order, header padded to 8."""
    names = {np.dtype(v): k for k, v in _DTYPES.items()}
    header, offset, chunks = {}, 0, []
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": names[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        chunks.append(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
