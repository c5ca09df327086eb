"""``REQUEST_SENT``: the kernel's first turn learns when its request is on the wire, to build
its cell view then (kernel/start.py). Called once a request's body is written, before any of
its answer; a failing callback never fails the request; without one nothing is traced."""

from __future__ import annotations

from deeptutor_jupyter.providers import make_model
from deeptutor_jupyter.providers._http import sent_trace
from deeptutor_jupyter.providers.base import REQUEST_SENT, ChatRequest, RoundEnd
from deeptutor_jupyter.testing import FakeLLMServer, Reply


def broken() -> None:
    raise RuntimeError("a view that cannot be built")


async def test_called_once_a_request_is_written_before_its_answer() -> None:
    seen: list[str] = []
    replies = [Reply(text="one"), Reply(text="two"), Reply(text="three")]
    with FakeLLMServer(replies) as server:
        model = make_model(provider="custom", model="fake-model", base_url=server.url)
        request = ChatRequest(model="fake-model", messages=[{"role": "user", "content": "a"}])
        try:
            token = REQUEST_SENT.set(lambda: seen.append("sent"))
            try:
                seen += [type(e).__name__ async for e in model.stream(request)]
            finally:
                REQUEST_SENT.reset(token)
            token = REQUEST_SENT.set(broken)
            try:
                with_broken = [e async for e in model.stream(request)]
            finally:
                REQUEST_SENT.reset(token)
            seen.append("unset")
            seen += [type(e).__name__ async for e in model.stream(request)]
        finally:
            await model.aclose()
    assert seen.count("sent") == 1 and seen[0] == "sent", seen  # before the answer's events
    assert "RoundEnd" in seen[1 : seen.index("unset")]
    assert isinstance(with_broken[-1], RoundEnd)  # the broken callback did not fail it
    assert sent_trace(None) is None  # nothing traced without a callback
