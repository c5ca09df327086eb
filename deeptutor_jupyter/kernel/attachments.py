"""What the panel attaches to a question (a cell, a file, a quote), read as the notebook-context
tools read the learner's work (kernel/notebook_context.py), bounded, before the turn starts.

Each attachment becomes a ``runtime.context.AttachedContext``: the turn shows it as a tool card
and its content goes to the model with the question, so the card is exactly what the model saw.
A file is read only under the server's root, only when it is text; a bad attachment is refused
in words (``AttachmentError``) and the question is not asked, so nothing is lost.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter._files import read_head
from deeptutor_jupyter.config import SERVER_ROOT_ENV
from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.kernel import notebook_context as nbc
from deeptutor_jupyter.kernel.i18n import t
from deeptutor_jupyter.runtime.context import AttachedContext

if TYPE_CHECKING:
    from deeptutor_jupyter.kernel.comm_messages import (
        Attachment,
        CellAttachment,
        FileAttachment,
        QuoteAttachment,
    )

FILE_CHARS = 12000  # what the model reads of one file
FILE_READ_BYTES = 256 * 1024  # read at most this much to find FILE_CHARS of text
NOTEBOOK_READ_BYTES = 20 * 1024 * 1024
QUOTE_CHARS = 4000
ERROR_CHARS = 3000


class AttachmentError(DeepTutorError, ValueError):
    code = "attachment"

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def resolve(
    attachments: list[Attachment],
    *,
    shell: Any,
    cell_errors: dict[int, str] | None,
    notebook_path: str,
    language: str = "en",
) -> list[AttachedContext]:
    """Every attachment as the context card the turn shows; AttachmentError on the first bad,
    in the learner's language (what is sent to the model stays English, like the tools')."""
    out = []
    for index, item in enumerate(attachments):
        try:
            if item.kind == "cell":
                name, args, content, summary = _cell(item, shell, cell_errors, language)
            elif item.kind == "file":
                root = server_root(notebook_path, language=language)
                name, args, content, summary = _file(item, root, language)
            else:
                name, args, content, summary = _quote(item)
        except (LookupError, OSError, ValueError) as exc:
            raise AttachmentError(index, str(exc)) from None
        out.append(
            AttachedContext(
                id=f"attached-{index + 1}",
                name=name,
                arguments=json.dumps(args, ensure_ascii=False),
                content=content,
                summary=summary,
            )
        )
    return out


def _cell(
    item: CellAttachment, shell: Any, cell_errors: dict[int, str] | None, language: str
) -> tuple[str, dict[str, Any], str, str]:
    if item.number is not None:
        try:
            # --cell N: what ran as [N] in this kernel, with its result and error
            content = nbc.cell_from_history(shell, item.number, cell_errors)
            if item.error and not (cell_errors or {}).get(item.number):
                content += f"\n\nIt raised an error:\n\n```\n{_tail(item.error)}\n```"
            return "read_cell", {"cell": item.number}, content, f"cell [{item.number}]"
        except LookupError:
            if not item.source.strip():
                raise
    if not item.source.strip():
        raise ValueError(t("attach_empty_cell", language))
    # A cell this kernel has not run: what the learner sees in it.
    source = item.source
    if len(source) > nbc.CELL_CHARS:
        source = source[: nbc.CELL_CHARS] + f"\n… ({len(item.source) - nbc.CELL_CHARS} more chars)"
    lang = "python" if item.cell_type == "code" else ""
    kind = "Markdown cell" if item.cell_type == "markdown" else "A cell not run in this kernel"
    content = f"{kind} of my notebook:\n\n```{lang}\n{source.rstrip()}\n```"
    if item.error:
        content += f"\n\nIt raised an error:\n\n```\n{_tail(item.error)}\n```"
    label = f"cell [{item.number}]" if item.number is not None else f"{item.cell_type} cell"
    return "read_cell", {"cell": item.number, "cell_type": item.cell_type}, content, label


_RULE = re.compile(r"^-{20,}\s*$", re.M)  # IPython's banner line: nothing to read


def _tail(error: str) -> str:
    text = _RULE.sub("", nbc._ANSI.sub("", error)).strip()
    return text if len(text) <= ERROR_CHARS else "…\n" + text[-ERROR_CHARS:]


def server_root(notebook_path: str, here: Path | None = None, language: str = "en") -> Path:
    """The server's root: the notebook's real folder, up as many levels as its path from the
    root has folders (the kernel runs in the notebook's folder).

    The path comes from the browser, so it is checked against the real one: the folders it
    names must be the real folder's last ones, and the root it gives must be inside the folder
    the server serves (``SERVER_ROOT_ENV``, set by our server extension; for a kernel another
    server started, see :func:`_unserved_limit`). A deeper made-up path once moved the root to
    ``/`` and read ``/etc/passwd``.
    """
    folders = PurePosixPath(notebook_path).parent.parts if notebook_path else ()
    if notebook_path.startswith("/") or ".." in folders or "." in folders:
        raise ValueError(t("attach_bad_root", language).format(path=notebook_path))
    notebook = nbc.notebook_path()
    real = (notebook.parent if notebook is not None else (here or Path.cwd())).resolve()
    depth = len(folders)
    base = real.parents[depth - 1] if 0 < depth <= len(real.parents) else real
    served = os.environ.get(SERVER_ROOT_ENV, "").strip()
    limit = Path(served).resolve() if served else _unserved_limit(real)
    if (
        depth >= len(real.parts)
        or (depth and real.parts[-depth:] != folders)
        or not base.is_relative_to(limit)
    ):
        raise ValueError(t("attach_not_here", language).format(path=notebook_path, real=real))
    return base


def _unserved_limit(real: Path) -> Path:
    """How high the root may go when no server of ours started this kernel, so the folder the
    server serves is unknown: up to the learner's home when the notebook is in it, else up to
    the notebook's top folder (``/srv`` of ``/srv/course/week1``); never ``/``."""
    try:
        home = Path.home().resolve()
    except (KeyError, RuntimeError):  # no HOME and no passwd entry
        home = Path("/")
    if len(home.parts) > 1 and real.is_relative_to(home):
        return home
    return Path(*real.parts[:2])


def _file(item: FileAttachment, root: Path, language: str) -> tuple[str, dict[str, Any], str, str]:
    relative = PurePosixPath(item.path.lstrip("/"))
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ValueError(t("attach_outside", language).format(path=item.path))
    if path.is_dir():
        raise ValueError(t("attach_folder", language).format(path=item.path))
    if not path.is_file():
        raise ValueError(t("attach_missing", language).format(path=item.path))
    size = path.stat().st_size
    # A notebook is read whole (its outputs make it big) to show its cells, bounded as cells.
    notebook = path.suffix == ".ipynb" and size <= NOTEBOOK_READ_BYTES
    # Not through a link swapped in since the check above, never a FIFO, bounded.
    data = read_head(path, NOTEBOOK_READ_BYTES if notebook else FILE_READ_BYTES)
    if b"\x00" in data[:8192]:
        raise ValueError(t("attach_binary", language).format(path=item.path))
    text = nbc.decode_text(data)
    args = {"path": str(relative)}
    if notebook:
        cells = _notebook_cells(text)
        if cells is not None:
            body = nbc.render_cells(cells, 0, None)
            content = f"The notebook {relative} ({len(cells)} cells):\n\n{body}"
            return "read_file", args, content, f"{relative}: {len(cells)} cells"
    text = text[: FILE_CHARS * 2]  # a notebook that did not parse is shown as text, cut alike
    shown = text[:FILE_CHARS]
    cut = len(shown) < len(text) or size > len(data)
    note = f"\n… (only the first {len(shown)} characters of {size} bytes are shown)" if cut else ""
    content = f"The file {relative}:\n\n```\n{shown.rstrip()}\n```{note}"
    summary = f"{relative}, first {len(shown)} chars of {size} bytes" if cut else str(relative)
    return "read_file", args, content, summary


def _notebook_cells(text: str) -> list[dict[str, Any]] | None:
    try:
        nb = json.loads(text)
    except ValueError:
        return None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return None
    return [
        {
            "type": c.get("cell_type", "code"),
            "source": "".join(c.get("source", "")),
            "tags": list((c.get("metadata") or {}).get("tags", [])),
        }
        for c in nb["cells"]
        if isinstance(c, dict)
    ]


def _quote(item: QuoteAttachment) -> tuple[str, dict[str, Any], str, str]:
    text = item.text
    if len(text) > QUOTE_CHARS:
        text = text[:QUOTE_CHARS] + f"\n… ({len(item.text) - QUOTE_CHARS} more chars)"
    where = f" in cell [{item.number}]" if item.number is not None else ""
    quoted = "\n".join(f"> {line}" for line in text.rstrip().splitlines())
    content = f"I selected this{where}:\n\n{quoted}"
    first = text.strip().splitlines()[0][:60] if text.strip() else ""
    return "selected_text", {"cell": item.number}, content, first
