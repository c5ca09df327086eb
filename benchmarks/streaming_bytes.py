"""Bytes of widget comm messages a streamed answer costs, in a real kernel (issue 14, row 1).

One real ipykernel (driven like JupyterLab by tests/e2e/kernel_driver.py) answers one ``%tutor``
from a FakeLLMServer that streams a long Markdown answer (paragraphs, lists, code fences, $$
math) one token-sized chunk every ``--chunk-delay`` seconds. Every iopub ``comm_msg`` is summed
(its JSON content, as the browser receives it) and compared with the answer's size: the goal is
under 3x. The answer the widgets finally show must equal the answer sent, byte for byte.

    .venv/bin/python benchmarks/streaming_bytes.py            # 62 kB at 50 tokens/s (~5 min)
    .venv/bin/python benchmarks/streaming_bytes.py --quick    # 6 kB, fast chunks
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

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


def comm_bytes(k: KernelDriver) -> tuple[int, int]:
    msgs = [m for m in k.iopub if m["header"]["msg_type"] in ("comm_msg", "comm_open")]
    return sum(len(json.dumps(m["content"])) for m in msgs), len(msgs)


def breakdown(k: KernelDriver) -> dict[str, int]:
    """Bytes by what a message carries (opened widgets, or the state keys it updates)."""
    out: dict[str, int] = {}
    for m in k.iopub:
        kind = m["header"]["msg_type"]
        if kind not in ("comm_msg", "comm_open"):
            continue
        data = m["content"].get("data", {})
        what = "open" if kind == "comm_open" else ",".join(sorted(data.get("state", {})))
        out[what] = out.get(what, 0) + len(json.dumps(m["content"]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", type=int, default=62_000, help="answer size in characters")
    p.add_argument("--chunk-delay", type=float, default=0.02, help="seconds between tokens")
    p.add_argument("--quick", action="store_true", help="6 kB at 1 ms a token (smoke test)")
    a = p.parse_args()
    size, delay = (6_000, 0.001) if a.quick else (a.size, a.chunk_delay)
    answer = make_answer(size)
    chunks = tokens(answer)
    print(
        f"streaming bytes benchmark: {len(answer):,} chars, {len(chunks):,} chunks, {delay} s each"
    )
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        server.add(Reply(text=answer, chunks=chunks, chunk_delay=delay))
        k = KernelDriver(kernel_env(Path(tmp), server), cwd=Path(tmp))
        try:
            k.execute("%load_ext deeptutor_jupyter")
            before, _ = comm_bytes(k)
            start = time.monotonic()
            k.execute("%tutor Explain eigenvectors at length.")
            view = k.wait_for(lambda: k.with_class("dt-turn") and k.with_class("dt-turn")[0])
            timeout = 60 + len(chunks) * delay * 3
            k.wait_for(lambda: "done" in json.dumps(k.widgets), timeout=timeout)
            k.wait_for(lambda: k.markdown_in(view) == answer, timeout=30)
            elapsed = time.monotonic() - start
            total, count = comm_bytes(k)
            total -= before
            blocks = len([c for c in k.descendants(view) if "dt-text" in str(k.widgets[c])])
            parts = breakdown(k)
        finally:
            k.shutdown()
    ratio = total / len(answer.encode())
    print(f"streamed in {elapsed:.1f} s; comm messages: {count:,} ({count / elapsed:.1f}/s)")
    print(f"answer blocks (Output widgets): {blocks}")
    print("bytes by kind: " + ", ".join(f"{w or '-'}={n:,}" for w, n in sorted(parts.items())))
    print(f"comm bytes: {total:,} = {ratio:.2f}x the answer (goal < {GOAL}x)")
    print("final widgets show the exact answer: yes")
    print(f"RESULT: {'PASS' if ratio < GOAL else 'FAIL'} bytes/answer {ratio:.2f}x")


if __name__ == "__main__":
    main()
