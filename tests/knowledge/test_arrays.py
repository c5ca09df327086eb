"""Files of several arrays (knowledge/arrays.py): exact round trip, one checksum, clear refusals."""

from __future__ import annotations

import hashlib
import mmap
from pathlib import Path

import numpy as np
import pytest

from deeptutor_jupyter.knowledge.arrays import open_arrays, write_arrays


def _write(path: Path, arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.blake2b(digest_size=32)
    write_arrays(path, arrays, digest)
    return digest.hexdigest()


def test_arrays_round_trip_and_the_digest_is_the_files(tmp_path: Path) -> None:
    arrays = {
        "ptr": np.arange(1001, dtype=np.int64) * 3,
        "empty": np.zeros(0, dtype=np.int32),
        "dead": np.array([True, False, True, True]),
        "ids": np.arange(-5, 2_000, dtype=np.int32),
    }
    digest = _write(tmp_path / "a.arrays", arrays)
    data = (tmp_path / "a.arrays").read_bytes()
    assert digest == hashlib.blake2b(data, digest_size=32).hexdigest()
    got = open_arrays(tmp_path / "a.arrays")
    assert list(got) == list(arrays)
    for name, array in arrays.items():
        assert got[name].dtype == array.dtype and np.array_equal(got[name], array), name
        assert not got[name].flags.writeable  # memory-mapped read-only
    for name, array in got.items():  # each array starts on a 64-byte boundary
        if array.size:
            assert (
                array.__array_interface__["data"][0] - got["ptr"].__array_interface__["data"][0]
            ) % 64 == 0, name


def test_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    _write(tmp_path / "a.arrays", {"x": np.zeros(3, np.int32)})
    with pytest.raises(FileExistsError):
        _write(tmp_path / "a.arrays", {"x": np.ones(3, np.int32)})


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"NOTARRAY" + data[8:],
        lambda data: data[:-16],  # the last array runs past the end
        lambda data: data[:12] + b"{" + data[13:],  # the header is not JSON
        lambda data: data[:6],
    ],
    ids=["magic", "truncated", "header", "short"],
)
def test_a_damaged_file_is_refused_with_a_value_error(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "a.arrays"
    _write(path, {"a": np.arange(10, dtype=np.int32), "b": np.arange(100, dtype=np.int64)})
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError):
        open_arrays(path)


def test_a_big_file_is_written_piece_by_piece_to_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import arrays as module

    data = {"a": np.arange(1000, dtype=np.int64), "b": np.array([True, False])}
    joined = _write(tmp_path / "joined.arrays", data)
    monkeypatch.setattr(module, "_JOIN_BELOW", 0)  # as for a base of 50,000 files
    pieces = _write(tmp_path / "pieces.arrays", data)
    assert joined == pieces
    assert (tmp_path / "joined.arrays").read_bytes() == (tmp_path / "pieces.arrays").read_bytes()


def test_a_big_file_is_memory_mapped_and_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deeptutor_jupyter.knowledge import arrays as module

    data = {"a": np.arange(5000, dtype=np.int32), "b": np.arange(7, dtype=np.int64)}
    _write(tmp_path / "x.arrays", data)
    read = open_arrays(tmp_path / "x.arrays")
    monkeypatch.setattr(module, "_READ_BELOW", 0)  # as for a base of 50,000 files
    mapped = open_arrays(tmp_path / "x.arrays")
    assert isinstance(read["a"].base, bytes)  # read into memory
    assert isinstance(mapped["a"].base, memoryview) and isinstance(mapped["a"].base.obj, mmap.mmap)
    for name, array in data.items():
        assert np.array_equal(mapped[name], array) and np.array_equal(read[name], array)
