"""Model text shown in a form as the chat shows it: escaped, Markdown code spans and bold as
HTML, LaTeX left for the ``HTMLMath`` widget that holds it to typeset (MathJax skips ``<code>``,
so ``$`` inside a code span stays literal)."""

from __future__ import annotations

import html
import re

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*([^*\n]+)\*\*")
_MATH = re.compile(r"\$[^$\n]+\$|\\\(|\\\[")


def inline_html(text: str) -> str:
    """Escaped ``text`` with `code` as ``<code>`` and **bold** as ``<b>``; line breaks kept."""
    parts = _CODE_SPAN.split(text)
    out: list[str] = []
    for i, part in enumerate(parts):
        if i % 2:  # inside a code span: literal, no bold
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            out.append(_BOLD.sub(r"<b>\1</b>", html.escape(part)).replace("\n", "<br>"))
    return "".join(out)


def is_rich(text: str) -> bool:
    """Whether ``text`` has code spans or LaTeX a plain-text label would show raw."""
    return bool(_CODE_SPAN.search(text) or _MATH.search(text))
