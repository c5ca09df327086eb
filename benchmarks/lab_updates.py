"""How many messages the Tutor panel gets for a long answer (kernel/comm.py coalescing).

A real kernel (jupyter_client) answers one question asked over the ``deeptutor`` comm, as the
panel asks it; FakeLLMServer streams a 10,000-token answer, one token per SSE chunk (0.5 ms
apart by default, a fast model; ``--token-delay 0`` sends them back to back). The script counts
the comm messages that reach the panel, the content deltas the runtime emitted (from the store),
and how many messages a second the panel had to render while the answer streamed.

Usage::

    .venv/bin/python benchmarks/lab_updates.py             # 10,000 tokens
    .venv/bin/python benchmarks/lab_updates.py --quick     # 1,000 tokens (smoke test)
"""

from __future__ import annotations

import argparse
import os
import queue
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from jupyter_client.manager import KernelManager  # noqa: E402

from deeptutor_jupyter.testing import FakeLLMServer, Reply  # noqa: E402

GOAL_PER_SECOND = 10.0


def kernel_env(home: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPTUTOR_")}
    env.update(
        DEEPTUTOR_HOME=str(home / "home"),
        DEEPTUTOR_PROVIDER="custom",
        DEEPTUTOR_BASE_URL=url,
        DEEPTUTOR_MODEL="fake-model",
        DEEPTUTOR_API_KEY="sk-bench",
        JPY_SESSION_NAME=str(home / "bench.ipynb"),
        IPYTHONDIR=str(home / "ipython"),
    )
    return env


def run(tokens: int, delay: float) -> dict[str, Any]:
    words = [f"t{i} " for i in range(tokens)]
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        home = Path(tmp)
        server.extend([Reply(chunks=words, chunk_delay=delay)])
        km = KernelManager(kernel_name="python3")
        km.start_kernel(env=kernel_env(home, server.url), cwd=tmp)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            kc.execute("%load_ext deeptutor_jupyter", silent=True)
            comm_id = uuid.uuid4().hex
            open_msg = {"comm_id": comm_id, "target_name": "deeptutor", "data": {}}
            kc.shell_channel.send(kc.session.msg("comm_open", open_msg))
            ask = {"action": "ask", "question": "Stream a long answer.", "conversation": None}
            kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": ask}))
            arrivals: list[tuple[float, dict[str, Any]]] = []
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                try:
                    msg = kc.get_iopub_msg(timeout=1)
                except queue.Empty:
                    continue
                content = msg["content"]
                if msg["header"]["msg_type"] != "comm_msg" or content["comm_id"] != comm_id:
                    continue
                arrivals.append((time.monotonic(), content["data"]))
                data = content["data"]
                if data.get("type") == "event" and data["event"]["type"] == "done":
                    break
            else:
                raise SystemExit("the turn did not finish in 600 s")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        db = sqlite3.connect(home / "home" / "state.db")
        emitted = db.execute("SELECT COUNT(*) FROM events WHERE type = 'content'").fetchone()[0]
        db.close()
    content = [
        (t, d) for t, d in arrivals if d.get("type") == "event" and d["event"]["type"] == "content"
    ]
    text = "".join(d["event"]["text"] for _, d in content)
    span = content[-1][0] - content[0][0] if len(content) > 1 else 0.0
    return {
        "tokens": tokens,
        "emitted": int(emitted),
        "messages": len(arrivals),
        "content_messages": len(content),
        "span": span,
        "intact": text == "".join(words),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument(
        "--token-delay", type=float, default=0.0005, help="seconds between streamed tokens"
    )
    parser.add_argument("--quick", action="store_true", help="1,000 tokens")
    args = parser.parse_args()
    tokens = 1_000 if args.quick else args.tokens
    print("lab update-rate benchmark:")
    r = run(tokens, args.token_delay)
    print(f"  stream: one token per SSE chunk, {args.token_delay * 1000:.2f} ms apart")
    rate = r["content_messages"] / r["span"] if r["span"] > 0 else float(r["content_messages"])
    print(f"  answer: {r['tokens']} tokens, {r['emitted']} content deltas emitted by the runtime")
    print(f"  panel received: {r['messages']} comm messages, {r['content_messages']} with content")
    print(f"  deltas per panel message: {r['emitted'] / max(r['content_messages'], 1):.1f}")
    print(f"  panel content messages per second while streaming: {rate:.1f} over {r['span']:.2f} s")
    print(f"  text intact: {r['intact']}")
    verdict = "met" if rate <= GOAL_PER_SECOND else "NOT met"
    print(f"  goal <= {GOAL_PER_SECOND:.0f} messages/s: {verdict}")
    if not r["intact"]:
        raise SystemExit("RESULT: the coalesced text differs from the streamed answer")
    print(f"RESULT: {r['content_messages']} panel messages for {r['emitted']} deltas ({verdict})")


if __name__ == "__main__":
    main()
