"""Reading the upstream's token count out of a relayed answer without holding the answer back.

The gateway forwards each chunk as it arrives and feeds a copy here; only lines that mention
``"usage"`` are parsed, and nothing of the text is kept. When an upstream sends no usage (or the
student stopped the answer first), a rough count stands in: the held estimate
for the prompt (``estimate_prompt_tokens``) and one token per streamed delta.
"""

from __future__ import annotations

import json
from typing import Any


class UsageScanner:
    def __init__(self) -> None:
        self._tail = b""
        self.prompt: int | None = None
        self.completion: int | None = None
        self.deltas = 0

    def feed(self, chunk: bytes) -> None:
        """One chunk of an SSE body; lines may be split across chunks."""
        lines = (self._tail + chunk).split(b"\n")
        self._tail = lines.pop()
        if len(self._tail) > 1 << 20:
            self._tail = b""  # a line this long is no usage line; do not grow without bound
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            self.deltas += 1
            if b'"usage"' in line:
                self._take(line[5:])

    def feed_json(self, data: bytes) -> None:
        """A whole non-streamed body."""
        self._take(data)

    def _take(self, raw: bytes) -> None:
        try:
            payload: Any = json.loads(raw)
        except ValueError:
            return
        usage = payload.get("usage") if isinstance(payload, dict) else None
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int):
                self.prompt = prompt
            if isinstance(completion, int):
                self.completion = completion

    def usage(self, prompt_estimate: int) -> tuple[int, int]:
        prompt = self.prompt if self.prompt is not None else prompt_estimate
        completion = self.completion if self.completion is not None else self.deltas
        return prompt, completion


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """A count that errs high: a token per three bytes of UTF-8 (English runs about four
    characters a token; Chinese about one character, three bytes), tools included. It is held
    from the budget before the request goes out, so erring low would let a long prompt pass."""
    try:
        text = json.dumps([body.get("messages", []), body.get("tools")], ensure_ascii=False)
    except (TypeError, ValueError):
        return 0
    return len(text.encode("utf-8")) // 3
