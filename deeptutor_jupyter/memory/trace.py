"""L1: one JSON line per turn, appended to ``trace/<surface>/<YYYY-MM-DD>.jsonl``.

The same record is the content of the ``application/vnd.deeptutor.trace+json`` bundle a turn
leaves in its cell, which is why a saved notebook can rebuild L1 (``import_notebooks``).
Files are append-only, so the set of known trace ids is kept incrementally: each file is read
from the offset reached last time, and a dedupe check costs the new bytes, not the whole log. A
turn's own trace (an id minted here) needs no check: appending it reads nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_validator
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.memory._files import append_line, locked

TRACE_MIME = "application/vnd.deeptutor.trace+json"
SURFACES = ("chat", "notebook", "quiz", "kb")

# Surfaces become file names and trace ids become footnote references, so both are kept to
# characters that survive a path, a Markdown footnote and the legacy "a, b" list.
SURFACE_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
TRACE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


class TraceAsk(TypedDict, total=False):
    """One ask_user question of a turn: option ids only; free text never enters a trace."""

    request_id: str
    tool_call_id: str
    selections: list[str]
    cancelled: bool


# Ids this process minted and has not appended yet: no file can hold one (80 random bits), so
# their first append needs no dedupe check, and a new kernel's first turn reads nothing of the
# day's file (it read all of it: 326 ms at 50,000 traces, issue 28). Any append removes the id,
# so a second append of the same record is checked like an import.
_unwritten: set[str] = set()


def new_trace_id() -> str:
    trace_id = "t_" + uuid.uuid4().hex[:20]
    _unwritten.add(trace_id)
    return trace_id


class TraceRecord(LazyModel):
    """One L1 line. Unknown fields (quiz results, later additions) are kept, not dropped."""

    model_config = ConfigDict(extra="allow")

    trace_id: str
    surface: str = "chat"
    kind: str = "turn"
    session_id: str
    turn_id: str
    model: str
    started_at: float
    finished_at: float
    question: str
    answer_summary: str
    tools: list[str] = Field(default_factory=list)
    ask_user: list[TraceAsk] = Field(default_factory=list)
    status: str = "done"
    notebook: str = ""
    kbs: list[str] = Field(default_factory=list)  # the knowledge bases the turn searched in

    @field_validator("trace_id")
    @classmethod
    def _trace_id_shape(cls, value: str) -> str:
        if not TRACE_ID_RE.match(value):
            raise ValueError("trace_id must be 1-128 of A-Z a-z 0-9 _ . : - (no spaces or commas)")
        return value

    @field_validator("surface")
    @classmethod
    def _surface_shape(cls, value: str) -> str:
        if not SURFACE_RE.match(value):
            raise ValueError("surface must be lower-case letters, digits, _ or - (max 32)")
        return value

    @field_validator("ask_user", mode="before")
    @classmethod
    def _no_free_text(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        allowed = TraceAsk.__annotations__.keys()
        return [
            {k: v for k, v in item.items() if k in allowed} if isinstance(item, dict) else item
            for item in value
        ]

    def day(self) -> str:
        """The file a record lands in: the UTC date it started (no DST or time-zone ambiguity)."""
        return dt.datetime.fromtimestamp(self.started_at, dt.UTC).strftime("%Y-%m-%d")


def not_replaced(records: list[TraceRecord]) -> list[TraceRecord]:
    """The records no regenerated turn replaced (runtime/session_edits.py). A replaced answer's
    trace stays in L1, and memory that already cites it keeps its footnote; it is only not
    offered to consolidation as new evidence: the learner asked for another answer."""
    replaced = {(r.model_extra or {}).get("replaces") for r in records} - {None}
    return [r for r in records if r.turn_id not in replaced]


_FENCE_RE = re.compile(r"```.*?(```|$)", re.S)
_MARKUP_RE = re.compile(r"(^|\s)#{1,6}\s+|[*_`>]+|!?\[([^\]]*)\]\([^)]*\)", re.M)


# How much of an answer its summary reads, in multiples of the limit: the regular expressions
# below cost ~0.2 s a megabyte, on the kernel's loop at the end of every turn (a 5 MB answer
# froze the cell's view for a second).
SUMMARY_READS = 64


def summarize_answer(answer: str, limit: int = 400) -> str:
    """A plain one-paragraph summary: code blocks become ``[code]``, markup goes, cut at a word.

    Deterministic on purpose: it runs at the end of every turn and must not cost a model call.
    It reads the first ``SUMMARY_READS`` times ``limit`` characters; a longer answer's summary
    ends in an ellipsis.
    """
    head = answer[: limit * SUMMARY_READS]
    text = _FENCE_RE.sub(" [code] ", head)
    text = _MARKUP_RE.sub(lambda m: (m.group(1) or "") + (m.group(2) or ""), text)
    text = " ".join(text.split())
    if len(text) <= limit:
        return text if len(head) == len(answer) else text + " …"
    cut = text[: max(limit - 1, 0)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


@dataclass
class _FileState:
    offset: int = 0
    ids: set[str] = field(default_factory=set)
    replaced: bool = False  # shrank since the union of ids was last rebuilt


class TraceLog:
    """The L1 directory of one learner. Thread-unsafe by design: one per ``MemoryStore``.

    ``_ids`` is the union of every file's ids, kept up to date as new bytes are read, so an
    append costs the bytes written since the last one, never a pass over the history.
    """

    def __init__(self, root: Path, lock_path: Path, *, fsync: bool = False) -> None:
        self.root = root
        self.lock_path = lock_path
        self.fsync = fsync
        self._files: dict[Path, _FileState] = {}
        self._ids: set[str] = set()

    def files(self, surface: str | None = None) -> list[Path]:
        if surface is not None:
            return sorted((self.root / surface).glob("*.jsonl"))
        return sorted(self.root.glob("*/*.jsonl"))

    def known_ids(self) -> set[str]:
        self._refresh()
        return set(self._ids)

    def append(self, records: Iterable[TraceRecord]) -> list[bool]:
        """Append each record unless its trace id is known; True for each one appended.

        A record always lands in the file of its surface and day, so a copy of it (a notebook
        imported twice) can only be in that file: only that file's ids are consulted, and only
        its bytes written since the last append are read. A record whose id this process minted
        and never appended (a turn's own trace) is written without reading anything: the first
        append of a new kernel costs the same with 50,000 traces in L1 as with none.
        """
        with locked(self.lock_path):
            added: list[bool] = []
            for record in records:
                path = self.root / record.surface / f"{record.day()}.jsonl"
                if record.trace_id in _unwritten:
                    _unwritten.discard(record.trace_id)
                elif record.trace_id in self._refresh_file(path).ids:
                    added.append(False)
                    continue
                append_line(path, record.model_dump_json(), fsync=self.fsync)
                added.append(True)
            return added

    def read(self, surface: str | None = None, since: float | None = None) -> list[TraceRecord]:
        first_day = None
        if since is not None:
            first_day = dt.datetime.fromtimestamp(since, dt.UTC).strftime("%Y-%m-%d")
        records: list[TraceRecord] = []
        seen: set[str] = set()
        for path in self.files(surface):
            if first_day is not None and path.stem < first_day:
                continue
            for record in _read_records(path):
                if record.trace_id in seen or (since is not None and record.started_at < since):
                    continue
                seen.add(record.trace_id)
                records.append(record)
        records.sort(key=lambda r: r.started_at)
        return records

    def forget(self) -> None:
        self._files.clear()
        self._ids.clear()

    def _refresh(self) -> None:
        # One directory listing per surface and one stat per day file; only new bytes are read.
        present = set(self.files())
        rebuild = bool(set(self._files) - present)
        for gone in set(self._files) - present:
            del self._files[gone]
        for path in present:
            rebuild |= self._refresh_file(path).replaced
        if rebuild:  # rare: a day file vanished or shrank, so its ids may be gone too
            self._ids = set().union(*(state.ids for state in self._files.values()))
            for state in self._files.values():
                state.replaced = False

    def _refresh_file(self, path: Path) -> _FileState:
        """The file's state with every complete line read (only the bytes new since last time)."""
        state = self._files.setdefault(path, _FileState())
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            size = 0
        if size < state.offset:  # the file was replaced (forget_all): start over
            state.offset, state.ids, state.replaced = 0, set(), True
        if size > state.offset:
            self._read_new(path, state)
        return state

    def _read_new(self, path: Path, state: _FileState) -> None:
        with path.open("rb") as handle:
            handle.seek(state.offset)
            chunk = handle.read()
        # A line without its newline may still be being written: leave it for next time.
        complete = chunk[: chunk.rfind(b"\n") + 1]
        for line in complete.splitlines():
            trace_id = _trace_id_of(line)
            if trace_id:
                state.ids.add(trace_id)
                self._ids.add(trace_id)
        state.offset += len(complete)


_ID_PREFIX = b'{"trace_id":"'


def _trace_id_of(line: bytes) -> str | None:
    # Lines we write start with the trace id (model_dump_json keeps field order): read it
    # without parsing the whole record. Anything else takes the full parse.
    if line.startswith(_ID_PREFIX):
        end = line.find(b'"', len(_ID_PREFIX))
        candidate = line[len(_ID_PREFIX) : end].decode("ascii", "replace") if end > 0 else ""
        if TRACE_ID_RE.match(candidate) and line.rstrip().endswith(b"}"):
            return candidate
    try:
        value = json.loads(line)
    except ValueError:
        return None
    trace_id = value.get("trace_id") if isinstance(value, dict) else None
    return trace_id if isinstance(trace_id, str) else None


def _read_records(path: Path) -> list[TraceRecord]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    records = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            records.append(TraceRecord.model_validate_json(line))
        except ValueError:
            continue  # a damaged line must not hide the rest of the day
    return records
