"""Misbehaving model servers for fault-injection tests: each function scripts one fault.

They are ``Reply`` values for ``FakeLLMServer`` (plus ``refused_url`` for a port where nothing
listens, and ``disk_full`` for the learner's store), so a test reads like the fault it injects::

    with FakeLLMServer([faults.keep_alive_only()]) as server: ...

``tests/e2e/test_faults.py`` runs every one of them against a real kernel and checks the card
the learner sees. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from deeptutor_jupyter.testing.fake_llm import Reply
from deeptutor_jupyter.testing.ports import refused_url

__all__ = ["refused_url"]  # re-exported: tests write faults.refused_url()

if TYPE_CHECKING:
    from deeptutor_jupyter.store.db import SQLiteFile


def reset_mid_stream(text: str = "The answer starts well and then", after: int = 2) -> Reply:
    """Stream ``after`` deltas of ``text``, then reset the connection (TCP RST)."""
    words = [w + " " for w in text.split()]
    return Reply(chunks=words, break_after=after, fault="reset")


def stalled() -> Reply:
    """Headers of an event stream, then silence: only the read timeout can end it."""
    return Reply(fault="stall")


def keep_alive_only(interval: float = 0.2) -> Reply:
    """An event stream of SSE comments only, which keep the read timeout from ever firing."""
    return Reply(fault="keepalive", chunk_delay=interval)


def empty_chunks_only(interval: float = 0.2) -> Reply:
    """An event stream of valid but empty chunks only (no choices, ``delta: {}``,
    ``content: ""``), which keep the read timeout from firing and show nothing."""
    return Reply(fault="empty", chunk_delay=interval)


def malformed_json() -> Reply:
    """An event whose data is not JSON."""
    return Reply(raw_sse=["data: {this is not json", ""])


def rate_limited(retry_after: float = 600) -> Reply:
    """HTTP 429 asking the client to wait ``retry_after`` seconds."""
    return Reply(
        status=429,
        error="Rate limit reached for requests",
        headers={"Retry-After": f"{retry_after:g}"},
    )


def huge_answer(megabytes: float = 5, chunk_kb: int = 256) -> Reply:
    """A valid answer of ``megabytes`` MB of text, in ``chunk_kb`` KB deltas."""
    line = "All work and no play makes a very long answer. "
    text = (line * (int(megabytes * 1024 * 1024) // len(line) + 1))[: int(megabytes * 1024 * 1024)]
    size = chunk_kb * 1024
    return Reply(text=text, chunks=[text[i : i + size] for i in range(0, len(text), size)])


@contextmanager
def disk_full(store: SQLiteFile) -> Iterator[None]:
    """The disk under ``store`` is full from now on until the block ends: any write that needs
    one more page fails with the real SQLITE_FULL ("database or disk is full") a full disk
    gives, from SQLite's own page limit (``max_page_count``) on the store's connection."""
    conn = store._conn
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")
    try:
        yield
    finally:
        conn.execute("PRAGMA max_page_count = 4294967294")
