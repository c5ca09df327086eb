"""Bytes to the browser a streamed answer costs, in a real kernel (issue 14 row 1, issue 28).

One real ipykernel (driven like JupyterLab by tests/e2e/kernel_driver.py) answers ``%tutor``
from a FakeLLMServer that streams a long Markdown answer (paragraphs, lists, code fences, $$
math) one token-sized chunk every ``--chunk-delay`` seconds. Every iopub message of the turn is
counted as it travels: its header, parent header, metadata and content frames, buffers, the
delimiter and the signature; widget opens, updates and closes, streams, status messages and the
final display update alike. Answers of 1/100, 1/10 and all of ``--size`` characters show how
the cost grows; the anchor is each answer's own size, from the same run. Goal: under 3x.
A kernel's first turn (a warm-up of the smallest size) is counted apart.

    .venv/bin/python benchmarks/streaming_bytes.py            # 620, 6,200, 62,000 chars
    .venv/bin/python benchmarks/streaming_bytes.py --quick    # 600 and 6,000 chars
    .venv/bin/python benchmarks/streaming_bytes.py --breakdown  # the smallest, every message

The smallest answer's messages, grouped by type and widget, are what a turn costs whatever its
length (issue 28: a 1-5 kB answer, the usual, mostly pays that).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deeptutor_jupyter.testing import FakeLLMServer, Reply  # noqa: E402
from tests.e2e.kernel_driver import KernelDriver, kernel_env  # noqa: E402

GOAL = 3.0


def make_answer(size: int) -> str:
    """Markdown like a long tutoring answer: prose, a list, a code fence, display math."""
    parts: list[str] = []
    i = 0
    while sum(map(len, parts)) < size:
        i += 1
        parts.append(
            f"## Step {i}\n\nAn eigenvector $v$ of $A$ keeps its direction: the map only "
            f"scales it by $\\lambda_{i}$. We check it on example {i} below, then look at why "
            "the characteristic polynomial gives every eigenvalue at once.\n\n"
            f"- first, write $A - \\lambda I$ for case {i}\n- then take its determinant\n\n"
            "```python\nimport numpy as np\n\nA = np.array([[2, 1], [1, 2]])\n\n"
            f"values, vectors = np.linalg.eig(A)  # case {i}\nprint(values)\n```\n\n"
            f"$$\n\\det(A - \\lambda I) = (2 - \\lambda)^2 - 1 = 0 \\quad ({i})\n\n$$\n\n"
        )
    return "".join(parts)[:size].rstrip() + "\n\nThat is all."


def tokens(text: str, width: int = 4) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)]


WIRE_EXTRA = len(b"<IDS|MSG>") + 64  # the delimiter and the HMAC signature of every message


def wire_bytes(m: dict[str, Any]) -> int:
    """What one iopub message costs on the wire to the browser: its four JSON frames (header,
    parent header, metadata, content), its binary buffers, the delimiter and the signature."""
    frames = (m["header"], m["parent_header"], m["metadata"], m["content"])
    size = sum(len(json.dumps(f, default=str).encode()) for f in frames)
    return size + sum(len(b) for b in m.get("buffers", [])) + WIRE_EXTRA


def final_update(k: KernelDriver, marker: str) -> dict[str, Any] | None:
    for m in k.iopub:
        data = (
            m["content"].get("data", {}) if m["header"]["msg_type"] == "update_display_data" else {}
        )
        if marker in json.dumps(data):
            return m
    return None


def model_name(state: dict[str, Any]) -> str:
    """The widget's model, an anywidget by its Python class (the status line, the answer)."""
    name = str(state.get("_model_name", "?"))
    if name == "AnyModel":
        return str(state.get("_anywidget_id", name)).rsplit(".", 1)[-1]
    return name.removesuffix("Model")


def detail(m: dict[str, Any]) -> str:
    """What a message carries, in a few words: the big parts of an open or a display."""
    kind, content = m["header"]["msg_type"], m["content"]
    parts: dict[str, Any] = {}
    if kind == "comm_open":
        parts = content["data"]["state"]
    elif kind in ("display_data", "update_display_data"):
        parts = content["data"]
    elif kind == "comm_msg":
        data = content["data"]
        parts = data.get("state") or {data.get("method", "?"): data.get("content")}
    sizes = sorted(((len(json.dumps(v)), key) for key, v in parts.items()), reverse=True)
    said = ", ".join(f"{key} {n:,}" for n, key in sizes[:3] if n > 40)
    if m["parent_header"]:
        said += ("; " if said else "") + "parented"
    return said


# One message: (type, type or widget and comm type, wire bytes, envelope bytes, what it carries)
Row = tuple[str, str, int, int, str]


def grouped(rows: list[Row], comm_only: bool = False) -> dict[str, list[int]]:
    """Count, bytes and envelope bytes of each type of message, a comm one by its widget."""
    groups: dict[str, list[int]] = {}
    for kind, what, size, envelope, _ in rows:
        if comm_only and not kind.startswith("comm_"):
            continue
        g = groups.setdefault(what, [0, 0, 0])
        g[0], g[1], g[2] = g[0] + 1, g[1] + size, g[2] + envelope
    return groups


def breakdown(r: dict[str, Any]) -> None:
    """One answer's messages, grouped by type and widget, largest first."""
    print("    by type and widget (count, bytes, of which envelopes):")
    for what, (count, size, envelope) in sorted(
        grouped(r["rows"]).items(), key=lambda kv: -kv[1][1]
    ):
        print(f"      {what:32} {count:3} {size:7,} B  {envelope:6,} B")


def one_answer(k: KernelDriver, server: FakeLLMServer, answer: str, delay: float) -> dict[str, Any]:
    chunks = tokens(answer)
    server.add(Reply(text=answer, chunks=chunks, chunk_delay=delay))
    k.iopub.clear()
    start = time.monotonic()
    k.execute("%tutor Explain eigenvectors at length.")
    timeout = 60 + len(chunks) * delay * 3
    last = k.wait_for(lambda: final_update(k, "That is all."), timeout=timeout)
    k.pump(1.0)  # what the end of the turn sends after its final display (closes)
    elapsed = time.monotonic() - start
    by_kind: dict[str, int] = {}
    models: dict[str, str] = {}
    envelopes = 0  # header, parent header, metadata, delimiter and signature of each message
    rows: list[Row] = []
    for m in k.iopub:
        kind, content = m["header"]["msg_type"], m["content"]
        by_kind[kind] = by_kind.get(kind, 0) + wire_bytes(m)
        carried = len(json.dumps(content, default=str).encode())
        envelope = wire_bytes(m) - carried - sum(len(b) for b in m.get("buffers", []))
        envelopes += envelope
        what = kind
        if kind.startswith("comm_"):
            if kind == "comm_open":
                models[content["comm_id"]] = model_name(content["data"]["state"])
            what = f"{models.get(content['comm_id'], '?')} {kind.removeprefix('comm_')}"
        rows.append((kind, what, wire_bytes(m), envelope, detail(m)))
    data = last["content"]["data"]
    # Its last words, prose in Markdown and in HTML alike (the trace's summary is its start).
    copies = sum(1 for v in data.values() if isinstance(v, str) and "That is all." in v)
    return {
        "total": sum(by_kind.values()),
        "comm": sum(n for kind, n in by_kind.items() if kind.startswith("comm_")),
        "by_kind": by_kind,
        # comm bytes by widget model and message kind
        "by_model": {what: g[1] for what, g in grouped(rows, comm_only=True).items()},
        "envelopes": envelopes,
        "final": wire_bytes(last),
        "copies": copies,
        "mimes": sorted(data),
        "count": len(k.iopub),
        "rows": rows,
        "elapsed": elapsed,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", type=int, default=62_000, help="largest answer, in characters")
    p.add_argument("--chunk-delay", type=float, default=0.002, help="seconds between tokens")
    p.add_argument("--quick", action="store_true", help="600 and 6,000 chars at 1 ms a token")
    p.add_argument(
        "--breakdown", action="store_true", help="also list the smallest answer's every message"
    )
    a = p.parse_args()
    sizes = [600, 6_000] if a.quick else [a.size // 100, a.size // 10, a.size]
    delay = 0.001 if a.quick else a.chunk_delay
    print(
        f"streaming bytes benchmark: answers of {', '.join(f'{n:,}' for n in sizes)} chars, "
        f"4-char tokens every {delay} s; every iopub message counted as sent on the wire"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        k = KernelDriver(kernel_env(Path(tmp), server), cwd=Path(tmp))
        try:
            k.execute("%load_ext deeptutor_jupyter")
            # A kernel's first turn also opens what every later turn shares (and may show its
            # view after its request has left): counted apart, so each size is a usual turn.
            warm = make_answer(sizes[0])
            first = one_answer(k, server, warm, delay)
            for size in sizes:
                answer = make_answer(size)
                results.append((answer, one_answer(k, server, answer, delay)))
        finally:
            k.shutdown()
    ratios = []
    for answer, r in results:
        n = len(answer.encode())
        ratio = r["total"] / n
        ratios.append(ratio)
        print(
            f"  answer {n:,} bytes (the anchor): all iopub {r['total']:,} bytes = {ratio:.2f}x, "
            f"comm alone {r['comm'] / n:.2f}x, {r['count']:,} messages in {r['elapsed']:.1f} s"
        )
        print(
            "    bytes by message type: "
            + ", ".join(f"{kind}={b:,}" for kind, b in sorted(r["by_kind"].items()))
        )
        top = sorted(r["by_model"].items(), key=lambda kv: -kv[1])[:6]
        print("    comm bytes by widget: " + ", ".join(f"{key}={b:,}" for key, b in top))
        print(
            f"    envelopes (headers, parent headers, metadata, signatures): "
            f"{r['envelopes']:,} bytes = {r['envelopes'] / n:.2f}x"
        )
        print(
            f"    final display update: {r['final']:,} bytes = {r['final'] / n:.2f}x the answer, "
            f"{r['copies']} copies of the answer ({', '.join(r['mimes'])})"
        )
    print(
        f"  a kernel's first turn, the same {len(warm.encode()):,}-byte answer: "
        f"{first['total']:,} bytes ({first['count']} messages)"
    )
    (small, rs), (large, rl) = results[0], results[-1]
    print(f"what a turn costs whatever its length: the {len(small.encode()):,}-byte answer")
    breakdown(rs)
    if a.breakdown:
        print("    every message, in order (bytes, of which envelope; what it carries):")
        for _kind, what, size, envelope, said in rs["rows"]:
            print(f"      {size:6,} {envelope:5,}  {what:32} {said}")
    slope = (rl["total"] - rs["total"]) / (len(large.encode()) - len(small.encode()))
    print(
        f"growth: {ratios[-1]:.2f}x at the largest answer vs {ratios[0]:.2f}x at the smallest; "
        f"each more answer byte costs {slope:.2f} bytes, a turn's fixed cost ~"
        f"{rs['total'] - slope * len(small.encode()):,.0f} bytes"
    )
    print(f"bytes to the browser: {ratios[-1]:.2f}x the answer (goal < {GOAL}x all messages)")
    print(f"RESULT: {'PASS' if ratios[-1] < GOAL else 'FAIL'} all iopub {ratios[-1]:.2f}x")


if __name__ == "__main__":
    main()
