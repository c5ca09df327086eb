"""What a student may send to ``/v1/chat/completions``: a typed, bounded request.

The gateway bills the course for whatever the upstream does with a request, so every field that
changes the cost is checked before anything is reserved: ``max_tokens`` is a bounded integer (a
number past SQLite's 64 bits once failed other students' admissions in the same batch), ``n``
is 1, ``stream`` is a JSON boolean (``"true"`` is streamed by many upstreams but would be billed
as a non-streamed answer). Parameters the course does not offer (``service_tier``, ``store``,
``metadata``, ...) are refused by name rather than passed on to an upstream that may charge for
them or keep the student's text.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from deeptutor_jupyter.errors import DeepTutorError

# One answer never needs more; a larger value is a mistake or an attempt on the budget.
MAX_ANSWER_TOKENS = 1_000_000
MAX_MESSAGES = 2_000

# What an OpenAI-compatible tutor client sends, besides the fields typed below.
PASSED_THROUGH = frozenset(
    {
        "temperature",
        "top_p",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "response_format",
        "reasoning_effort",
    }
)


class RequestError(DeepTutorError, ValueError):
    """A request the gateway refuses before reserving anything; the text is for the student."""

    code = "bad_request"


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(max_length=255)
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: StrictBool = False
    stream_options: dict[str, Any] | None = None
    max_tokens: StrictInt | None = Field(None, ge=1, le=MAX_ANSWER_TOKENS)
    max_completion_tokens: StrictInt | None = Field(None, ge=1, le=MAX_ANSWER_TOKENS)
    n: StrictInt = Field(1, ge=1, le=1)

    @property
    def asked_tokens(self) -> int | None:
        """The answer length the client asked for, whichever name it used."""
        return self.max_tokens if self.max_tokens is not None else self.max_completion_tokens


def parse_chat_body(raw: bytes) -> tuple[ChatBody, dict[str, Any]]:
    """The typed request and the JSON object to forward; RequestError says what is wrong."""
    import json

    try:
        data = json.loads(raw or b"")
    except ValueError:
        raise RequestError("The request body is not JSON.") from None
    if not isinstance(data, dict):
        raise RequestError("The request needs a model and a list of messages.")
    try:
        body = ChatBody.model_validate(data)
    except ValidationError as exc:
        raise RequestError(_words(exc)) from None
    unknown = sorted(set(body.model_extra or {}) - PASSED_THROUGH)
    if unknown:
        names = ", ".join(repr(n)[:60] for n in unknown[:5])
        raise RequestError(f"The course service does not pass on these parameters: {names}.")
    return body, data


def _words(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    if where in ("model", "messages"):
        return "The request needs a model and a list of messages."
    if where == "n":
        return "The course service gives one answer per request (n must be 1)."
    if where == "stream":
        return "stream must be true or false (a JSON boolean)."
    if where in ("max_tokens", "max_completion_tokens"):
        return f"{where} must be a whole number from 1 to {MAX_ANSWER_TOKENS:,}."
    return f"{where}: {first['msg']}"
