"""Minimal safetensors reader/writer, the format the C++ engine loads.

Floating tensors: F32, BF16, F16; integer tensors: I64, I32, I16, I8, U8, BOOL. save_file keeps
each tensor's dtype (a dtype outside that set is written as F32). load_file reads one tensor at a
time (no copy of the whole file in memory); read_header gives names, dtypes and shapes only.
"""
import json
import os
import struct

import torch

_DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2),
           "I64": (torch.int64, 8), "I32": (torch.int32, 4), "I16": (torch.int16, 2),
           "I8": (torch.int8, 1), "U8": (torch.uint8, 1), "BOOL": (torch.bool, 1)}
_NAMES = {dt: name for name, (dt, _) in _DTYPES.items()}


def dtype_name(dtype):
    return _NAMES[dtype]


def dtype_of(name):
    return _DTYPES[name][0]


def _raw(t):
    t = t.detach().contiguous().cpu()
    if t.dtype not in _NAMES:
        t = t.float()
    if t.numel() == 0:
        return t, b""
    if t.dtype == torch.bool:
        return t, t.to(torch.uint8).reshape(-1).numpy().tobytes()
    return t, t.reshape(-1).view(torch.uint8).numpy().tobytes()


def save_file(tensors, path, metadata=None):
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t, raw = _raw(tensors[name])
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def read_header(path):
    """Returns (header dict without __metadata__, byte offset of the data section)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: truncated (no header length)")
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            raise ValueError(f"{path}: header length {n} past end of file")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise ValueError(f"{path}: header is not JSON: {e}")
    header.pop("__metadata__", None)
    base = 8 + n
    for name, info in header.items():
        if info.get("dtype") not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: dtype {info.get('dtype')!r} not supported")
        dtype, elem = _DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        count = 1
        for d in info["shape"]:
            count *= d
        if e - b != count * elem:
            raise ValueError(f"{path}: tensor {name}: {e - b} bytes for shape {info['shape']} {info['dtype']}")
        if base + e > size:
            raise ValueError(f"{path}: tensor {name} past end of file")
    return header, base


def load_file(path, names=None):
    """Reads the tensors of a safetensors file (all, or those in names) as CPU tensors."""
    header, base = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if names is not None and name not in names:
                continue
            dtype, _ = _DTYPES[info["dtype"]]
            b, e = info["data_offsets"]
            f.seek(base + b)
            buf = bytearray(f.read(e - b))
            if not buf:
                out[name] = torch.empty(info["shape"], dtype=dtype)
                continue
            t = torch.frombuffer(buf, dtype=torch.uint8)
            t = t.to(torch.bool) if dtype == torch.bool else t.view(dtype)
            out[name] = t.reshape(info["shape"]).clone()
    return out
