"""What the tutor can see of the learner's work: the notebook, the last error, a variable.

These tools live in ``kernel/`` because they read the kernel's own state (the user namespace,
the last exception, the input history); the rest of the runtime never imports IPython.
Everything sent to the model is bounded: a preview, never a full dump.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from deeptutor_jupyter._files import read_head
from deeptutor_jupyter.kernel.describe import INSPECT_SECONDS, describe, preview, type_name
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.limits import TUTOR_MD_BYTES
from deeptutor_jupyter.tools.base import ArgsT, Tool, ToolContext, ToolResult

CELL_CHARS = 2000
NOTEBOOK_CHARS = 20000
TUTOR_MD_CHARS = 6000
ON_SCREEN = "the notebook on screen (unsaved changes included)"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def notebook_path(cwd: Path | None = None) -> Path | None:
    """The notebook file this kernel serves, when the server said which one and it exists."""
    name = os.environ.get("JPY_SESSION_NAME", "")
    if not name.endswith(".ipynb"):
        return None
    here = cwd or Path.cwd()
    for candidate in (Path(name), here / name, here / Path(name).name):
        if candidate.is_file():
            return candidate
    return None


def notebook_cells(shell: Any) -> tuple[list[dict[str, Any]], str]:
    """Cells with type, source and tags, and where they came from."""
    path = notebook_path()
    if path is not None:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(nb, dict) or not isinstance(nb.get("cells", []), list):
                raise ValueError("not a notebook")
            cells = [
                {
                    "type": c.get("cell_type", "code"),
                    "source": "".join(c.get("source", "")),
                    "tags": list((c.get("metadata") or {}).get("tags", [])),
                }
                for c in nb.get("cells", [])
                if isinstance(c, dict)
            ]
            return cells, f"the saved file {path.name}"
        except (OSError, ValueError):
            pass
    history = list((getattr(shell, "user_ns", {}) or {}).get("In", []))[1:]
    return [
        {"type": "code", "source": s, "tags": []} for s in history
    ], "this kernel's input history"


def saved_cell(cell_id: str | None) -> dict[str, Any]:
    """The cell with this id in the saved notebook (as the instructor handed it out), or {}
    when it cannot be found."""
    path = notebook_path()
    if not cell_id or path is None:
        return {}
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            if isinstance(cell, dict) and cell.get("id") == cell_id:
                return cell
    except (OSError, ValueError, AttributeError):
        pass
    return {}


def cell_tags(cell_id: str | None) -> tuple[str, ...]:
    """The tags of the cell with this id in the saved notebook (the instructor's ``exercise``
    tags, set before the notebook was handed out), or none when it cannot be found."""
    tags = (saved_cell(cell_id).get("metadata") or {}).get("tags", [])
    return tuple(str(t) for t in tags) if isinstance(tags, list) else ()


def hidden_tests(cell: dict[str, Any]) -> str:
    """An exercise cell's hidden tests (docs/book.md#cell-metadata), or ""."""
    own = (cell.get("metadata") or {}).get("deeptutor") or {}
    tests = own.get("hidden_tests", "") if isinstance(own, dict) else ""
    return tests if isinstance(tests, str) else ""


def cell_from_history(shell: Any, number: int, errors: dict[int, str] | None = None) -> str:
    """What the learner sees as cell ``[number]``: its source, its result and its error.

    Read from the kernel itself (``In``, ``Out`` and the errors recorded by the
    ``post_run_cell`` hook of kernel/magics.py), so a cell typed since the last save counts and
    the number is the one on screen, not a position in the saved file.
    """
    ns = getattr(shell, "user_ns", {}) or {}
    inputs = list(ns.get("In", []) or [])
    if not 0 < number < len(inputs):
        last = len(inputs) - 2  # In already holds the cell running now, the one asking
        seen = f"the cells run before this one are [1] to [{last}]" if last > 0 else "none ran yet"
        raise LookupError(
            f"There is no cell [{number}] in this kernel: {seen}. Use the number shown to the "
            f"left of the cell, e.g. --cell {max(last, 1)}."
        )
    source = str(inputs[number])
    if len(source) > CELL_CHARS:
        source = source[:CELL_CHARS] + f"\n… ({len(inputs[number]) - CELL_CHARS} more chars)"
    parts = [f"Cell [{number}] of my notebook:\n\n```python\n{source.rstrip()}\n```"]
    outputs = ns.get("Out", {}) or {}
    if number in outputs:
        result = preview(outputs[number])["preview"]
        parts.append(f"Its result (Out[{number}]):\n\n```\n{result}\n```")
    error = (errors or {}).get(number)
    if error:
        parts.append(f"It raised an error:\n\n```\n{error.rstrip()}\n```")
    return "\n\n".join(parts)


def error_of_run(shell: Any, exc: BaseException) -> str:
    """A cell's error as ``%tutor --cell`` shows it later: the learner's frames, bounded."""
    text = _ANSI.sub("", learner_traceback(traceback.TracebackException.from_exception(exc), shell))
    return text if len(text) <= 3000 else "…\n" + text[-3000:]


def render_cells(cells: list[dict[str, Any]], start: int, end: int | None) -> str:
    """Cells as the model reads them; a cell from the notebook on screen also carries its
    ``count`` ([N] when it ran), its full ``length`` and its text ``outputs``."""
    out: list[str] = []
    used = 0
    for index, cell in enumerate(cells[start:end], start=start):
        ran = f", ran as [{cell['count']}]" if cell.get("count") else ""
        tags = f", tags: {', '.join(cell['tags'])}" if cell["tags"] else ""
        source = cell["source"]
        length = max(cell.get("length", 0), len(source))
        if length > CELL_CHARS:
            source = source[:CELL_CHARS] + f"\n… ({length - CELL_CHARS} more chars)"
        block = f"[cell {index}] ({cell['type']}{ran}{tags})\n{source}\n"
        if cell.get("outputs"):
            block += f"Output:\n{cell['outputs'].rstrip()}\n"
        if used + len(block) > NOTEBOOK_CHARS:
            out.append(f"… ({len(cells) - index} more cells not shown; ask for a range)")
            break
        out.append(block)
        used += len(block)
    return "\n".join(out)


def last_error_text(shell: Any = None) -> str | None:
    """The last error of this kernel as the learner would tell it: their frames only.

    IPython's own frames (``interactiveshell.py run_code``), library internals and absolute
    paths of this machine mean nothing to a reader and end up in the saved notebook, so cells
    read ``Cell In[3], line 2`` like IPython's own display and library frames become one line.
    """
    etype = getattr(sys, "last_type", None)
    value = getattr(sys, "last_value", None)
    tb = getattr(sys, "last_traceback", None)
    if etype is None or value is None:
        return None
    text = learner_traceback(traceback.TracebackException(etype, value, tb), shell)
    text = _ANSI.sub("", text)
    return text if len(text) <= 6000 else "…\n" + text[-6000:]


def learner_traceback(error: traceback.TracebackException, shell: Any = None) -> str:
    """A chained exception, oldest first, each with the learner's frames only."""
    chain: list[tuple[traceback.TracebackException, str]] = []
    current: traceback.TracebackException | None = error
    link = ""
    while current is not None and len(chain) < 5:
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    cells = _cell_numbers(shell)
    parts: list[str] = []
    for exc, link_to_next in reversed(chain):
        parts.append(_one_exception(exc, cells))
        if link_to_next:
            parts.append(link_to_next)
    return "\n".join(parts)


_CAUSE = "The above exception was the direct cause of the following exception:\n"
_CONTEXT = "During handling of the above exception, another exception occurred:\n"


def _cell_numbers(shell: Any) -> dict[str, int]:
    """IPython's map from a cell's compiled file name to its execution count (``In[N]``)."""
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None)
    return dict(mapping) if isinstance(mapping, dict) else {}


def _one_exception(exc: traceback.TracebackException, cells: dict[str, int]) -> str:
    lines = ["Traceback (most recent call last):"] if exc.stack else []
    hidden: list[str] = []
    for frame in exc.stack:
        where = _frame_place(frame, cells)
        if where is None:
            hidden.append(_library_name(frame.filename))
            continue
        if hidden:
            lines.append(_hidden_line(hidden))
            hidden = []
        lines.append(f"  {where}")
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    if hidden and len(lines) > 1:
        lines.append(_hidden_line(hidden))
    lines.append("".join(exc.format_exception_only()).rstrip())
    return "\n".join(lines) + "\n"


def _hidden_line(hidden: list[str]) -> str:
    names = ", ".join(dict.fromkeys(hidden))
    count = len(hidden)
    return f"  … {count} frame{'s' if count != 1 else ''} inside {names}"


def _frame_place(frame: traceback.FrameSummary, cells: dict[str, int]) -> str | None:
    """``Cell In[3], line 2`` or ``File helpers.py, line 4, in f``; None for library code."""
    name = "" if frame.name == "<module>" else f", in {frame.name}"
    if frame.filename in cells:
        return f"Cell In[{cells[frame.filename]}], line {frame.lineno}{name}"
    match = re.match(r"<ipython-input-(\d+)-", frame.filename)
    if match:
        return f"Cell In[{match.group(1)}], line {frame.lineno}{name}"
    if _library_name(frame.filename):
        return None
    return f"File {_short_path(frame.filename)}, line {frame.lineno}{name}"


def _library_name(filename: str) -> str:
    """The package a frame belongs to when it is not the learner's code, else ""."""
    if filename.startswith("<"):  # <frozen runpy>, <string>: never the learner's file
        return "Python"
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1 :]
            return rest[0].removesuffix(".py") if rest else marker
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if Path(filename).is_relative_to(stdlib):
        rest = Path(filename).relative_to(stdlib).parts
        return rest[0].removesuffix(".py") if rest else "Python"
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if prefix and Path(filename).is_relative_to(Path(prefix) / "lib"):
            return "Python"
    if "ipykernel_" in filename or "/IPython/" in filename:
        return "IPython"
    return ""


def _short_path(filename: str) -> str:
    path = Path(filename)
    for base, shown in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            return shown + str(path.relative_to(base))
        except ValueError:
            continue
    return path.name


_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16: its BOM starts with UTF-16 LE's
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes, *, cut: bool = False) -> str:
    """Text an instructor saved with any editor: a BOM says the encoding (Windows Notepad writes
    UTF-16 with one), else UTF-8, else cp1252/latin-1, which decode every byte.

    ``cut``: the bytes are the head of a longer file, so a character split at the end is
    dropped rather than taken for another encoding.
    """

    def decode(encoding: str) -> str:
        return str(codecs.getincrementaldecoder(encoding)().decode(data, final=not cut))

    for bom, encoding in _BOMS:
        if data.startswith(bom):
            with contextlib.suppress(UnicodeDecodeError):
                return decode(encoding)
    try:
        return decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def tutor_md_blocks(start: Path | None = None) -> list[str]:
    """TUTOR.md files from the filesystem root down to the notebook's folder.

    The outermost (a course's) comes first and the nearest last, so a folder's instructions
    add to and override the course's: the prompt says the later ones win.
    """
    here = (start or Path.cwd()).resolve()
    found = [d / "TUTOR.md" for d in (here, *here.parents) if (d / "TUTOR.md").is_file()]
    blocks = []
    for path in reversed(found):
        try:
            head = read_head(path, TUTOR_MD_BYTES)
        except OSError:
            continue  # a link, a FIFO, unreadable: not an instruction anyone can rely on
        text = decode_text(head, cut=len(head) == TUTOR_MD_BYTES)[:TUTOR_MD_CHARS]
        blocks.append(f"Instructions from the instructor ({path}):\n{text.strip()}")
    if blocks:
        blocks.insert(
            0,
            "The instructor's TUTOR.md files follow, the course's first; when they disagree, "
            "the later (nearer to the notebook) wins. Follow them, including what they say "
            "about cells with tags.",
        )
    return blocks


class _NoArgs(LazyModel):
    pass


class ReadNotebookArgs(LazyModel):
    start: int = Field(0, ge=0, description="First cell index to show.")
    end: int | None = Field(None, ge=0, description="Cell index to stop before; all when absent.")


class KernelTool(Tool[ArgsT]):
    """A tool that reads this kernel's state; the shell comes from the kernel at registration."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell


class ReadNotebookTool(KernelTool[ReadNotebookArgs]):
    name: ClassVar[str] = "read_notebook"
    description: ClassVar[str] = (
        "Read the learner's current notebook: cells with their index, type, tags and source. "
        "Use it to see the learner's work before answering about it."
    )
    Args: ClassVar[type[BaseModel]] = ReadNotebookArgs

    async def run(self, args: ReadNotebookArgs, ctx: ToolContext) -> ToolResult:
        from deeptutor_jupyter.kernel.live_notebook import cells_on_screen

        screen = await cells_on_screen(self.shell)
        if screen.cells is not None:
            cells = [
                {"type": c.cell_type, "source": c.source, "tags": c.tags,
                 "count": c.execution_count, "length": c.source_length, "outputs": c.outputs}
                for c in screen.cells
            ]  # fmt: skip
            origin, total, why = ON_SCREEN, screen.total, ""
        else:
            cells, origin = notebook_cells(self.shell)
            total = len(cells)
            why = f" Changes not saved are not included: {screen.problem}."
        if not cells:
            return ToolResult(
                content=f"The notebook has no cells yet (read from {origin}).{why}",
                summary=f"empty, from {origin}",
            )
        body = render_cells(cells, args.start, args.end)
        if total > len(cells):
            body += f"\n… ({total - len(cells)} more cells on screen were not sent)"
        return ToolResult(
            content=f"Notebook cells from {origin} ({total} cells):{why}\n\n{body}",
            summary=f"{total} cells from {origin}",
        )


class LastErrorTool(KernelTool[_NoArgs]):
    name: ClassVar[str] = "last_error"
    description: ClassVar[str] = "The last error raised in the learner's kernel, with traceback."
    Args: ClassVar[type[BaseModel]] = _NoArgs

    async def run(self, args: _NoArgs, ctx: ToolContext) -> ToolResult:
        text = last_error_text(self.shell)
        if text is None:
            return ToolResult(content="No error has been raised in this kernel.", summary="none")
        return ToolResult(content=text, summary=text.strip().splitlines()[-1][:80])


class InspectArgs(LazyModel):
    name: str = Field(description="A variable name in the learner's namespace.")


class InspectVariableTool(KernelTool[InspectArgs]):
    name: ClassVar[str] = "inspect_variable"
    description: ClassVar[str] = (
        "Look at one variable of the learner's kernel: type, shape, dtype, length and a short "
        "preview (never the full value)."
    )
    Args: ClassVar[type[BaseModel]] = InspectArgs

    async def run(self, args: InspectArgs, ctx: ToolContext) -> ToolResult:
        ns = getattr(self.shell, "user_ns", {}) or {}
        if args.name not in ns or args.name.startswith("_"):
            names = sorted(n for n in ns if not n.startswith("_") and n not in ("In", "Out"))
            listed = ", ".join(names[:40]) or "none"
            return ToolResult(
                content=f"No variable named {args.name!r}. Defined: {listed}.",
                is_error=True,
                summary="not defined",
            )
        value = ns[args.name]
        info = await describe(value, INSPECT_SECONDS)
        if info is None:
            kind = type_name(value)
            return ToolResult(
                content=(
                    f"{args.name} is a {kind}, but describing it took longer than "
                    f"{INSPECT_SECONDS:g} s (its __repr__, len or attributes are slow), so there "
                    "is no preview. Ask the learner what it holds, or inspect a smaller part."
                ),
                is_error=True,
                summary=f"{kind}: too slow to describe",
                data={"type": kind, "timed_out": True},
            )
        content = json.dumps({"name": args.name, **info}, ensure_ascii=False, indent=1)
        return ToolResult(content=content, summary=info["type"], data=info)


def kernel_tools(shell: Any) -> list[Tool[Any]]:
    from deeptutor_jupyter.tools.light import (
        CHECK_EXERCISE,
        EDIT_CELL,
        INSERT_CELLS,
        LazyTool,
    )

    # Cells are written through deeptutor_jupyter.cells only (deferred: loaded when needed).
    # The deferred ones stand in until a turn loads them: a chat request imports none of the
    # cells and book code (tools/light.py).
    cells, frontend = "deeptutor_jupyter.cells.tools", lambda: lab_frontend(shell)
    return [
        ReadNotebookTool(shell),
        LastErrorTool(shell),
        InspectVariableTool(shell),
        LazyTool(
            "insert_cells",
            cells,
            "InsertCellsTool",
            notebook_path,
            frontend,
            deferred=True,
            description=INSERT_CELLS,
        ),
        LazyTool(
            "edit_cell",
            cells,
            "EditCellTool",
            notebook_path,
            frontend,
            deferred=True,
            description=EDIT_CELL,
        ),
        LazyTool(
            "check_exercise",
            "deeptutor_jupyter.book.grading",
            "CheckExerciseTool",
            notebook_path,
            deferred=True,
            description=CHECK_EXERCISE,
        ),
    ]


def lab_frontend(shell: Any) -> Any:
    """JupyterLab's notebook model for this kernel's notebook, when there is a kernel."""
    name = os.environ.get("JPY_SESSION_NAME", "")
    if getattr(shell, "kernel", None) is None or not name.endswith(".ipynb"):
        return None
    from deeptutor_jupyter.kernel.cells_comm import LabFrontend

    return LabFrontend(name)
