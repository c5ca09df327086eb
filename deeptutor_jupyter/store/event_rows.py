"""Streamed text events are saved as runs, one row per run, and replayed exactly.

A turn streams one ``content`` (or ``thinking``) event per token; one row each made a 5 MB answer
add 20 MB to ``state.db`` (issue 14). ``coalesce`` merges consecutive text events of the same
type and ``explore`` flag into one row: its ``seq`` is the run's last, its text the run's text,
and ``_parts`` the length of each event's text, so ``expand`` can start a replay in the middle of
a run (a view that reconnects ``after_seq``): replay gives back every event with its own seq.

A long run is saved zlib-compressed (``pack``/``unpack``): its text is already in the history
(``messages``), and the part lengths alone cost a byte or more per delta, so an uncompressed
run kept ``state.db`` above twice the answer (issue 28). Short rows stay JSON text, and rows of
older stores (always JSON text) read as before.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

Row = tuple[str, int, str, dict[str, Any], float]  # turn_id, seq, type, data, ts
PARTS = "_parts"
_TEXT_EVENTS = ("content", "thinking")
PACK_FROM = 512  # characters of text: below, a row stays readable JSON


def pack(data: dict[str, Any]) -> str | bytes:
    """The row's ``data`` column: JSON text, or a zlib blob of it for a long run of text."""
    text = json.dumps(data, ensure_ascii=False)
    if PARTS in data and len(data.get("text", "")) >= PACK_FROM:
        return zlib.compress(text.encode("utf-8"), 6)
    return text


def unpack(raw: str | bytes) -> dict[str, Any]:
    if isinstance(raw, bytes):
        raw = zlib.decompress(raw).decode("utf-8")
    data: dict[str, Any] = json.loads(raw)
    return data


def _mergeable(row: Row) -> bool:
    _turn, _seq, kind, data, _ts = row
    return kind in _TEXT_EVENTS and set(data) <= {"text", "explore"} and "text" in data


def coalesce(rows: Iterable[Row]) -> list[Row]:
    """Runs of text events (same turn, type and explore flag, consecutive seq) as one row each."""
    out: list[Row] = []
    run: list[Row] = []

    def close() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            turn, seq, kind, data, ts = run[-1]
            texts = [r[3]["text"] for r in run]
            merged = {**data, "text": "".join(texts), PARTS: [len(t) for t in texts]}
            out.append((turn, seq, kind, merged, ts))
        run.clear()

    for row in rows:
        if run and not (
            _mergeable(row)
            and row[0] == run[-1][0]
            and row[2] == run[-1][2]
            and row[1] == run[-1][1] + 1
            and bool(row[3].get("explore")) == bool(run[-1][3].get("explore"))
        ):
            close()
        if _mergeable(row):
            run.append(row)
        else:
            out.append(row)
    close()
    return out


def replay(rows: Iterable[tuple[Any, ...]], after_seq: int) -> Iterator[tuple[Any, ...]]:
    """``(seq, type, data, ...)`` rows as the events that were emitted, each with its own seq,
    from ``after_seq`` on: a merged run is split back at its parts' lengths (their ``ts`` is the
    run's last)."""
    for seq, kind, data, *more in rows:
        parts = data.get(PARTS)
        if parts is None:
            yield (seq, kind, data, *more)
            continue
        rest = {k: v for k, v in data.items() if k not in (PARTS, "text")}
        text, at = data["text"], 0
        for part_seq, size in enumerate(parts, start=seq - len(parts) + 1):
            if part_seq > after_seq:
                yield (part_seq, kind, {"text": text[at : at + size], **rest}, *more)
            at += size
