"""Keep the configured API keys out of everything a turn persists or shows.

A key can arrive from many sides: a learner's variable a tool inspects, a cell it reads, an
endpoint that echoes it inside its answer. Every value an event carries is scrubbed before any
subscriber (a view, the store, the trace) sees it. A streamed answer is scrubbed across deltas:
the tail that could be the start of a key is held back until the next delta shows it is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MARK = "[redacted]"
MIN_SECRET = 8  # shorter strings would redact ordinary words


def usable(secrets: Iterable[str]) -> list[str]:
    return sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)


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
