"""Keep the configured keys out of everything that leaves the model loop for storage or display.

One register of this process's secrets (``register``: the model key and the hub token, as soon as
settings are resolved; an MCP server's ``env`` and ``headers`` values) and one ``clean`` that
takes every known form of them out of a value (the key, reversed, in base64). ``clean`` sits at the
few doors data leaves by, so no path needs its own call: every SQLite write (store/db.py ``_tx``:
events, turns, messages, pending questions and answers, quiz answers), every memory file
(memory/_files.py: L2/L3 documents, ``write_memory``, traces), every output bundle a cell shows
and saves (kernel/display.py) and every request body sent to a model (providers/_http.py).

Events are scrubbed earlier too, when emitted (runtime/events.py), because a streamed answer must be
scrubbed across deltas: the tail that could be the start of a key is held back until the next
delta shows it is not.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterable
from typing import Any

MARK = "[redacted]"
MIN_SECRET = 8  # shorter strings would redact ordinary words

_known: set[str] = set()
_forms: list[str] = []
_lock = threading.Lock()


def forms(secret: str) -> set[str]:
    """The spellings of a secret worth taking out: as is, reversed, and base64 (padded or not,
    standard and URL-safe): a model-written test once returned the key reversed."""
    raw = secret.encode()
    b64 = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    return {secret, secret[::-1], *b64, *(b.rstrip("=") for b in b64)}


def usable(secrets: Iterable[str]) -> list[str]:
    """Every form of the secrets long enough to redact, longest first."""
    found = {f for s in secrets if s and len(s) >= MIN_SECRET for f in forms(s)}
    return sorted(found, key=len, reverse=True)


def register(*secrets: str | None) -> None:
    """Add secrets this process must never store or show; None and short ones are ignored."""
    new = {s for s in secrets if s and len(s) >= MIN_SECRET} - _known
    if not new:
        return
    global _forms
    with _lock:
        _known.update(new)
        _forms = usable(_known)


def known() -> list[str]:
    """Every form of every registered secret (for a caller that scrubs a stream itself)."""
    return _forms


def clean(value: Any) -> Any:
    """``value`` without any registered secret (strings at any depth); the same object when
    nothing changed. The one function every door out of the loop calls."""
    return scrub(value, _forms)


def scrub_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MARK)
    return text


def scrub(value: Any, secrets: list[str]) -> Any:
    """The value with every secret replaced, in strings at any depth; the same object when
    nothing changed."""
    if not secrets:
        return value
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if isinstance(value, dict):
        out = {k: scrub(v, secrets) for k, v in value.items()}
        return value if all(out[k] is value[k] for k in value) else out
    if isinstance(value, list | tuple):
        items = [scrub(v, secrets) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, tuple) else items
    return value


class StreamScrubber:
    """Scrubs a text stream delta by delta, holding back a possible start of a secret."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = secrets
        self.held = ""

    def feed(self, delta: str) -> str:
        text = scrub_text(self.held + delta, self.secrets)
        hold = self._suspect_tail(text)
        self.held = text[len(text) - hold :] if hold else ""
        return text[: len(text) - hold]

    def flush(self) -> str:
        text, self.held = scrub_text(self.held, self.secrets), ""
        return text

    def _suspect_tail(self, text: str) -> int:
        longest = 0
        for secret in self.secrets:
            for k in range(min(len(secret) - 1, len(text)), longest, -1):
                if text.endswith(secret[:k]):
                    longest = k
                    break
        return longest
