"""A minimal GGUF (version 3) writer for the reader model: llama
architecture, float32 tensors, a character vocabulary as a SentencePiece
("llama") tokenizer without merges. Only what kvg's loader reads
(engine/model.cpp, engine/tokenizer_gguf.cpp); every key is one it knows."""
import struct

ALIGNMENT = 32
UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32 = 0


def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(kind, v):
    if kind == UINT32:
        return struct.pack("<I", v)
    if kind == INT32:
        return struct.pack("<i", v)
    if kind == FLOAT32:
        return struct.pack("<f", v)
    if kind == BOOL:
        return struct.pack("<B", 1 if v else 0)
    if kind == STRING:
        return _string(v)
    raise ValueError(kind)


def write_gguf(path, metadata, tensors):
    """metadata: list of (key, kind, value) where kind is a scalar kind or
    (ARRAY, element kind); tensors: list of (name, numpy float32 array) in
    torch layout (the first dimension is the slowest, GGUF lists it last)."""
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, kind, value in metadata:
        out += _string(key)
        if isinstance(kind, tuple):
            element = kind[1]
            out += struct.pack("<IIQ", ARRAY, element, len(value))
            for v in value:
                out += _value(element, v)
        else:
            out += struct.pack("<I", kind) + _value(kind, value)
    offset = 0
    blobs = []
    for name, array in tensors:
        data = array.astype("<f4").tobytes()
        dims = list(reversed(array.shape))
        out += _string(name) + struct.pack("<I", len(dims))
        for d in dims:
            out += struct.pack("<Q", d)
        out += struct.pack("<IQ", GGML_F32, offset)
        blobs.append(data)
        offset += (len(data) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    out += b"\0" * (-len(out) % ALIGNMENT)
    for data in blobs:
        out += data + b"\0" * (-len(data) % ALIGNMENT)
    with open(path, "wb") as f:
        f.write(out)
