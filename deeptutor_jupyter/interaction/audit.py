"""Who was asked what, and when it was answered: ids, times, outcomes. Never the free text.

Free-text answers can hold anything a learner types (names, grades, secrets), so the log keeps
only the length of the custom input. One JSON object per line, appended with O_APPEND so lines
from two kernels do not interleave.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

AuditEvent = Literal["asked", "answered", "cancelled", "expired", "rejected"]


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(
        self,
        event: AuditEvent,
        *,
        session_id: str,
        request_id: str,
        tool_call_id: str = "",
        asked_at: float | None = None,
        selections: list[str] | None = None,
        custom_input: str | None = None,
        reason: str = "",
    ) -> None:
        entry: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "event": event,
            "session_id": session_id,
            "request_id": request_id,
            "tool_call_id": tool_call_id,
        }
        if asked_at is not None:
            entry["asked_at"] = round(asked_at, 3)
        if event in ("answered", "cancelled", "expired"):
            entry["answered_at"] = entry["ts"]
            entry["outcome"] = event
        if selections is not None:
            entry["selections"] = list(selections)
        if custom_input is not None:
            entry["custom_input_length"] = len(custom_input)
        if reason:
            entry["reason"] = reason
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
