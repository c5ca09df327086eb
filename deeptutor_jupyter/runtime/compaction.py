"""Keep a long conversation within the model's context (issue 14: 182 kB requests after 1,000
turns, the history never trimmed).

``compact_history`` is a pure function over the message list: when the history's estimated size
passes the budget, the older turns become one summary message and the recent turns stay as they
were. The summary keeps what a tutor needs later: every question the learner asked, the answers
the learner gave to ``ask_user`` questions (the tool results of those calls), the questions the
tutor left open (its replies that ended by asking), and the first lines of its other answers. It
says where it comes from (how many messages and turns it replaces). No model call: it is
deterministic and free, and the store keeps the full conversation (store/db.py ``history``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from deeptutor_jupyter.messages import Message

CHARS_PER_TOKEN = 4
KEEP_RECENT_TURNS = 4  # the last turns always go to the model as they were
CLIP = 240
SUMMARY_PREFIX = "[Summary of the earlier conversation"


@dataclass(frozen=True)
class Compaction:
    replaced_messages: int
    replaced_turns: int
    before_tokens: int
    after_tokens: int

    @property
    def notice(self) -> str:
        return (
            f"Earlier conversation summarised to stay within the model's context: "
            f"{self.replaced_turns} turns ({self.replaced_messages} messages), "
            f"~{self.before_tokens:,} -> ~{self.after_tokens:,} tokens."
        )


def estimate_tokens(messages: list[Message]) -> int:
    return len(json.dumps(messages, ensure_ascii=False)) // CHARS_PER_TOKEN


def compact_history(
    history: list[Message], budget_tokens: int, keep_turns: int = KEEP_RECENT_TURNS
) -> tuple[list[Message], Compaction | None]:
    """The history to send, and what was compacted (None when it already fits)."""
    before = estimate_tokens(history)
    if before <= budget_tokens:
        return history, None
    starts = [i for i, m in enumerate(history) if m["role"] == "user"]
    if len(starts) <= keep_turns:
        return history, None
    cut = starts[-keep_turns]
    # A tight budget keeps fewer recent turns, down to one.
    while cut != starts[-1] and estimate_tokens(history[cut:]) > budget_tokens // 2:
        cut = starts[starts.index(cut) + 1]
    old, recent = history[:cut], history[cut:]
    room = budget_tokens * CHARS_PER_TOKEN // 2  # the summary takes at most half the budget
    summary: Message = {"role": "user", "content": _summary(old, room)}
    noted: Message = {"role": "assistant", "content": "Noted."}
    compacted: list[Message] = [summary, noted, *recent]
    turns = sum(1 for m in old if m["role"] == "user" and not _is_summary(m))
    turns += _summarised_turns(old)
    return compacted, Compaction(len(old), turns, before, estimate_tokens(compacted))


def _is_summary(message: Message) -> bool:
    return str(message.get("content") or "").startswith(SUMMARY_PREFIX)


def _summarised_turns(messages: list[Message]) -> int:
    """Turns an earlier summary already stood for (it says how many on its first line)."""
    for m in messages:
        if _is_summary(m):
            head = str(m.get("content") or "").split(" turns", 1)[0]
            digits = head.rsplit(" ", 1)[-1]
            return int(digits) if digits.isdigit() else 0
    return 0


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= CLIP else line[: CLIP - 1] + "…"


def _summary(messages: list[Message], room: int) -> str:
    turns = sum(1 for m in messages if m["role"] == "user" and not _is_summary(m))
    turns += _summarised_turns(messages)
    head = f"{SUMMARY_PREFIX}: {turns} turns ({len(messages)} messages) replaced]"
    ask_ids = {
        call["id"]
        for m in messages
        for call in m.get("tool_calls") or []
        if call["function"]["name"] == "ask_user"
    }
    lines: list[tuple[int, str]] = []  # (rank, line): rank 0 is kept longest
    for m in messages:
        content = str(m.get("content") or "")
        if _is_summary(m):  # an earlier summary is carried over, its ranks kept
            lines += [(_rank(line), line) for line in content.splitlines()[1:]]
        elif m["role"] == "user":
            lines.append((1, f"- Learner asked: {_clip(content)}"))
        elif m["role"] == "tool" and m.get("tool_call_id") in ask_ids:
            lines.append((0, f"- Learner answered a question: {_clip(content)}"))
        elif m["role"] == "assistant" and content.rstrip().endswith("?"):
            lines.append((0, f"- Open question from the tutor: {_clip(content[-CLIP:])}"))
        elif m["role"] == "assistant" and content.strip():
            lines.append((2, f"- Tutor answered: {_clip(content)[:100]}"))
    return "\n".join([head, *_fit(lines, room - len(head))])


def _rank(line: str) -> int:
    if line.startswith(("- Learner answered", "- Open question")):
        return 0
    return 1 if line.startswith(("- Learner asked", "- (")) else 2


def _fit(lines: list[tuple[int, str]], room: int) -> list[str]:
    """Drop the least important lines first (the tutor's answers, then the learner's older
    questions), oldest first, until the rest fits; say how many were left out."""
    kept = list(lines)
    dropped = 0
    for rank in (2, 1, 0):
        while sum(len(line) + 1 for _, line in kept) > room:
            oldest = next((i for i, (r, _) in enumerate(kept) if r == rank), None)
            if oldest is None:
                break
            del kept[oldest]
            dropped += 1
    out = [line for _, line in kept]
    return ([f"- ({dropped} older lines left out)"] if dropped else []) + out
