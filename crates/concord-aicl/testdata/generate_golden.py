#!/usr/bin/env python3
"""Golden vectors for concord-aicl, produced with Python's own base64.b85encode/b85decode.

Run from anywhere:  python3 crates/concord-aicl/testdata/generate_golden.py
It rewrites golden-base85.json and golden-tensors.json next to this script. The output is
deterministic (fixed seed), so re-running it must not change the committed files.

Tensor data is packed with `struct` in little-endian C order (no numpy needed); bfloat16 is
the top half of a float32, built from bit patterns so that every value is exact.
"""

import base64
import json
import math
import random
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
rng = random.Random(20250721)

# dtype -> struct format character (little-endian), itemsize
FORMATS = {
    "bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
    "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q",
    "float16": "e", "float32": "f", "float64": "d",
}
INT_RANGES = {
    "int8": (-2**7, 2**7 - 1), "uint8": (0, 2**8 - 1),
    "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
    "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1),
}
# Shapes chosen so that byte lengths are odd, partial base85 groups of every size occur,
# and the scalar and empty cases are covered.
SHAPES = [[], [0], [1], [2], [3], [5], [7], [2, 3], [3, 1, 3], [2, 0, 4], [4, 4]]


def json_float(value):
    """Floats as Python's repr text ("0.1", "nan", "-inf"): JSON has no NaN or infinity, and
    a test reading them back should parse the text itself with correct rounding."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def float_values(dtype, count):
    specials = {
        "float16": [0.0, -0.0, 1.5, -2.0, 65504.0, 6.103515625e-05, 5.960464477539063e-08,
                    math.inf, -math.inf, math.nan],
        "float32": [0.0, -0.0, 0.1, -1.5, 3.4028234663852886e38, 1.401298464324817e-45,
                    math.inf, -math.inf, math.nan],
        "float64": [0.0, -0.0, 0.1, -1.5, 1.7976931348623157e308, 5e-324,
                    math.inf, -math.inf, math.nan],
    }[dtype]
    values = []
    for index in range(count):
        if index < len(specials) and rng.random() < 0.5:
            values.append(specials[index])
        elif dtype == "float16":
            # Random bit pattern, excluding NaN/inf (exponent all ones).
            bits = rng.getrandbits(16)
            if (bits >> 10) & 0x1F == 0x1F:
                bits &= 0xBFFF
            values.append(struct.unpack("<e", struct.pack("<H", bits))[0])
        elif dtype == "float32":
            values.append(struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0])
        else:
            values.append(rng.uniform(-1e12, 1e12))
    return values


def bfloat16_case(shape):
    count = math.prod(shape)
    bits = []
    for _ in range(count):
        pattern = rng.getrandbits(16)
        if (pattern >> 7) & 0xFF == 0xFF:  # avoid NaN/inf in random draws
            pattern &= 0xBFFF
        bits.append(pattern)
    if count >= 3:
        bits[0], bits[1], bits[2] = 0x3FC0, 0x7F80, 0x7FC0  # 1.5, inf, nan
    data = b"".join(struct.pack("<H", b) for b in bits)
    values = [json_float(struct.unpack("<f", struct.pack("<I", b << 16))[0]) for b in bits]
    return data, values


def tensor_case(dtype, shape):
    count = math.prod(shape)
    if dtype == "bfloat16":
        data, values = bfloat16_case(shape)
    else:
        fmt = FORMATS[dtype]
        if dtype == "bool":
            raw = [rng.random() < 0.5 for _ in range(count)]
        elif dtype in INT_RANGES:
            low, high = INT_RANGES[dtype]
            raw = [rng.choice([low, high, 0, rng.randint(low, high)]) for _ in range(count)]
        else:
            raw = float_values(dtype, count)
        data = struct.pack("<" + fmt * count, *raw)
        # Read back what was stored (float32 rounding etc.).
        stored = struct.unpack("<" + fmt * count, data)
        values = [json_float(v) if isinstance(v, float) else v for v in stored]
    encoded = base64.b85encode(data).decode("ascii")
    shape_text = ",".join(str(d) for d in shape)
    return {
        "dtype": dtype,
        "shape": shape,
        "values": values,
        "hex": data.hex(),
        "base85": encoded,
        "aicl": f"[t:{dtype}:{shape_text}:{encoded}]",
    }


def decode_result(text):
    try:
        return {"text": text, "hex": base64.b85decode(text.encode("ascii")).hex()}
    except ValueError as error:
        message = str(error)
        at = int(message.rsplit(" ", 1)[1])
        kind = "overflow" if "overflow" in message else "bad_char"
        return {"text": text, "error": kind, "at": at, "python": message}


def base85_vectors():
    encode = []
    for length in list(range(0, 22)) + [31, 64, 257]:
        data = bytes(rng.getrandbits(8) for _ in range(length))
        encode.append({"hex": data.hex(), "base85": base64.b85encode(data).decode("ascii")})
    for data in [b"\x00" * 7, b"\xff" * 7, b"a", b"aaaaa", b"\xff\xff\xff\xfe"]:
        encode.append({"hex": data.hex(), "base85": base64.b85encode(data).decode("ascii")})
    decode = [decode_result(text) for text in [
        "VE", "VF", "Vz", "VPO", "VPRn", "VPRo", "|NsC0", "|NsC0|N", "0000000",
        "~~~~~", "|NsC1", "00000|NsC1", "00000~~", "0000~~~", "00\"00", "0000000.00",
        "abc\\d", "VPRom VPO",
    ]]
    return {"encode": encode, "decode": decode}


def main():
    tensors = []
    for dtype in list(FORMATS) + ["bfloat16"]:
        for shape in SHAPES:
            tensors.append(tensor_case(dtype, shape))
    (HERE / "golden-tensors.json").write_text(json.dumps(tensors, indent=1) + "\n")
    (HERE / "golden-base85.json").write_text(json.dumps(base85_vectors(), indent=1) + "\n")


if __name__ == "__main__":
    main()
