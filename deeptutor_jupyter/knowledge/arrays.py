"""Several 1-d numpy arrays in one file, read-only views when read.

A refresh writes the delta, the dead mask, the lengths and the document frequencies: six
arrays. As six ``.npy`` files that is six file creations, and on a learner's disk, after the
pause in which they edited a file, each creation costs more than computing the array. One file
per group of arrays written together costs one.

Layout: ``MAGIC``, the header's length (4 bytes, little-endian), the header (JSON: each array's
name, dtype, length and offset), then each array's bytes at an offset aligned to 64 bytes.
Whoever reads a file checks it against the checksum its manifest records first; the reader
here checks only that the header is well formed and every array lies inside the file.

numpy is imported inside the functions, never at module import.
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path
from typing import Any

import orjson

from deeptutor_jupyter._files import FILE_MODE, write_all

__all__ = ["open_arrays", "write_arrays"]

MAGIC = b"DTARRAY1"
_ALIGN = 64
# A file is written, and hashed, a slice at a time: one write() of a whole 3 or 13 MB array
# cost 4-10x the same bytes in 1 MiB writes here (the index of a 4 or 16 MB source), and a
# slice just written is still in cache when it is hashed. A refresh's small arrays are
# joined into one write instead (one call, not one per array).
_SLICE = 1 << 20
_JOIN_BELOW = _SLICE
_READ_BELOW = 1 << 20  # smaller files are read into memory, bigger ones memory-mapped
_DTYPE = re.compile(r"[<>|][iub]\d{1,2}")


def write_arrays(path: Path, arrays: dict[str, Any], digest: Any) -> None:
    """Create ``path`` (it must not exist) holding ``arrays``; every byte goes into ``digest``
    (a hashlib object) as it is written, so the file is never read back to be hashed."""
    import numpy as np

    parts = {name: np.ascontiguousarray(array) for name, array in arrays.items()}
    start = 0
    while True:  # the header's length moves the data, whose offsets are in the header
        entries: list[tuple[str, str, int, int]] = []
        offset = start
        for name, array in parts.items():
            entries.append((name, array.dtype.str, int(array.size), offset))
            offset = _aligned(offset + array.nbytes)
        header = orjson.dumps(entries)
        needed = _aligned(len(MAGIC) + 4 + len(header))
        if needed <= start:
            break
        start = needed
    pieces: list[bytes | memoryview] = [MAGIC + len(header).to_bytes(4, "little") + header]
    written = len(pieces[0])
    for (_, _, _, at), array in zip(entries, parts.values(), strict=True):
        data = array.view(np.uint8).data
        pieces.append(bytes(at - written))
        pieces += [data[i : i + _SLICE] for i in range(0, len(data), _SLICE)]
        written = at + array.nbytes
    if written <= _JOIN_BELOW:  # a refresh's arrays: one write
        pieces = [b"".join(pieces)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        for piece in pieces:
            write_all(fd, piece)  # type: ignore[arg-type]  # any buffer
            digest.update(piece)
    finally:
        os.close(fd)


def open_arrays(path: Path) -> dict[str, Any]:
    """The arrays of a file ``write_arrays`` made, read-only: memory-mapped, or read into
    memory when the file is small.

    ValueError (or OSError) when it is not such a file or an array lies outside it.
    """
    import numpy as np

    with open(path, "rb") as fh:
        head = fh.read(len(MAGIC) + 4)
        if len(head) != len(MAGIC) + 4 or head[: len(MAGIC)] != MAGIC:
            raise ValueError(f"{path.name} is not an index array file")
        header = orjson.loads(fh.read(int.from_bytes(head[len(MAGIC) :], "little")))
        size = os.fstat(fh.fileno()).st_size
        mapped: Any
        if size <= _READ_BELOW:  # a refresh's delta: one read costs less than mapping it
            fh.seek(0)
            mapped = fh.read()
            size = len(mapped)
        else:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    out: dict[str, Any] = {}
    if not isinstance(header, list):
        raise ValueError(f"{path.name}: the header has an unknown format")
    for entry in header:
        if not (isinstance(entry, list) and len(entry) == 4):
            raise ValueError(f"{path.name}: the header has an unknown format")
        name, kind, count, offset = entry
        if not (isinstance(kind, str) and _DTYPE.fullmatch(kind)):
            raise ValueError(f"{path.name}: {name!r} has an unknown type {kind!r}")
        dtype = np.dtype(kind)
        if not (isinstance(count, int) and isinstance(offset, int) and count >= 0):
            raise ValueError(f"{path.name}: {name!r} has a malformed length or offset")
        if offset < 0 or offset + count * dtype.itemsize > size:
            raise ValueError(f"{path.name}: {name!r} lies outside the file")
        out[str(name)] = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset)
    return out


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN
