"""Reading a GGUF model file's header without loading the model: its key-values (size, architecture) and whether
the file is whole. Hostile headers (arrays nested thousands deep, absurd counts) raise ValueError, never recurse."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

# --- the GGUF header --------------------------------------------------------------------------------------------
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_NESTING = 8                 # arrays of arrays in real headers go 2 deep; a file 5,000 deep is hostile (issue #41)


def _read(stream: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = stream.read(size)
    if len(data) != size:
        raise ValueError("the GGUF header ends early")
    return struct.unpack(fmt, data)[0]


def _skip(stream: BinaryIO, size: int) -> None:
    """Past `size` bytes that must lie inside the file (a count of 2^59 made `seek` raise OSError, issue #47)."""
    here = stream.tell()
    end = stream.seek(0, 2)
    if size > end - here:
        raise ValueError("the GGUF header ends early")
    stream.seek(here + size)


def _string(stream: BinaryIO) -> str:
    length = _read(stream, "<Q")
    if length > 1 << 24:
        raise ValueError("a GGUF string is implausibly long")
    return stream.read(length).decode("utf-8", "replace")


def _value(stream: BinaryIO, kind: int, depth: int = 0):
    if kind in _SCALARS:
        return _read(stream, _SCALARS[kind])
    if kind == _STRING:
        return _string(stream)
    if kind == _ARRAY:
        if depth >= MAX_NESTING:
            raise ValueError(f"the GGUF header nests arrays more than {MAX_NESTING} deep")
        item_kind, count = _read(stream, "<I"), _read(stream, "<Q")
        if item_kind in _SCALARS:           # e.g. token scores: skipped, not read one by one
            _skip(stream, struct.calcsize(_SCALARS[item_kind]) * count)
            return None
        for _ in range(count):
            _value(stream, item_kind, depth + 1)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")


def gguf_metadata(path: Path) -> dict[str, object]:
    """The scalar and string key-values of a GGUF file's header (arrays such as the vocabulary are skipped)."""
    found: dict[str, object] = {}
    with Path(path).open("rb") as stream:
        if stream.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version = _read(stream, "<I")
        if version < 2:
            raise ValueError(f"GGUF version {version} is too old to read")
        _read(stream, "<Q")                 # tensors
        for _ in range(_read(stream, "<Q")):
            key = _string(stream)
            value = _value(stream, _read(stream, "<I"))
            if value is not None:
                found[key] = value
    return found


# ggml tensor types: (elements per block, bytes per block) of those whose size we know; others are checked by offset
_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
           10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
           24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2)}
MAX_TENSORS = 1 << 20


def gguf_layout_problem(path: Path) -> str | None:
    """Why a GGUF file cannot be whole, or None: the header must read to its end (keys and tensor list) and every
    tensor's data must lie inside the file. Catches a download cut short or a file that only starts like a model,
    which the four magic bytes alone let through (issue #41 item 8)."""
    size = Path(path).stat().st_size
    try:
        with Path(path).open("rb") as stream:
            if stream.read(4) != b"GGUF":
                return "it does not start like a GGUF file"
            if _read(stream, "<I") < 2:
                return "its GGUF version is too old to read"
            tensors, keys = _read(stream, "<Q"), _read(stream, "<Q")
            if not 0 < tensors <= MAX_TENSORS:
                return f"its header lists {tensors} tensors"
            alignment = 32
            for _ in range(keys):
                key, value = _string(stream), _value(stream, _read(stream, "<I"))
                if key == "general.alignment" and isinstance(value, int) and value > 0:
                    alignment = value
            ends = []
            for _ in range(tensors):
                _string(stream)
                dims = _read(stream, "<I")
                if dims > 8:
                    return "a tensor in its header has more than 8 dimensions"
                elements = 1
                for _ in range(dims):
                    elements *= _read(stream, "<Q")
                kind, offset = _read(stream, "<I"), _read(stream, "<Q")
                per_block, block_bytes = _BLOCKS.get(kind, (1, 0))
                ends.append(offset + -(-elements // per_block) * block_bytes)
            data_start = -(-stream.tell() // alignment) * alignment
    except (ValueError, OSError, OverflowError) as error:      # whatever else a hostile header makes of a read
        return str(error)
    needed = data_start + max(ends)
    if needed > size:
        return f"it is cut short: {size:,} bytes, while its tensors need {needed:,}"
    return None
