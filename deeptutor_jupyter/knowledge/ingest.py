"""Reading source files into chunks that know where they came from.

Chunks follow the author's structure rather than a fixed window: Markdown splits at headings
(the heading path becomes the title), notebooks at cells (a markdown cell's headings carry over
to the code cells below it), Python at top-level functions and classes, PDFs at pages. Only a
piece longer than ``MAX_CHUNK_CHARS`` is cut further, at blank lines where possible, so a
citation still points at one cell, page or section.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.knowledge.model import Chunk

__all__ = [
    "MAX_CHUNK_CHARS",
    "SUPPORTED_SUFFIXES",
    "IngestError",
    "ingest_file",
    "relative_path",
]

MAX_CHUNK_CHARS = 1500
SUPPORTED_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".py", ".ipynb", ".pdf"})

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MARKS = ("#", "`", "~")  # the first character of every heading or fence line


class IngestError(DeepTutorError, ValueError):
    code = "ingest"

    """A file of a supported type that could not be read; the message names the file."""


@dataclass
class _Piece:
    text: str
    title: str
    kind: str
    line: int | None = None
    cell: int | None = None
    cell_id: str | None = None
    page: int | None = None


def relative_path(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` in POSIX form, or absolute when it lies outside."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


@overload
def ingest_file(
    path: Path | str,
    root: Path,
    kb: str,
    *,
    data: bytes | None = None,
    rel: str | None = None,
    lazy: Literal[False] = False,
) -> list[Chunk]: ...


@overload
def ingest_file(
    path: Path | str,
    root: Path,
    kb: str,
    *,
    data: bytes | None = None,
    rel: str | None = None,
    lazy: Literal[True],
) -> Iterator[Chunk]: ...


def ingest_file(
    path: Path | str,
    root: Path,
    kb: str,
    *,
    data: bytes | None = None,
    rel: str | None = None,
    lazy: bool = False,
) -> list[Chunk] | Iterator[Chunk]:
    """The chunks of one file, chosen by suffix; an unknown suffix gives ``[]``.

    Raises IngestError for a supported file that cannot be read (bad JSON, a broken PDF).
    Chunk ids are ``<path>#<n>``: stable while the file is unchanged. ``data`` is the file's
    content when the caller has read it already (to hash it), ``rel`` its path from ``root``.

    ``lazy``: the chunks one at a time, Markdown and text cut as they are consumed. Every
    error is still raised by this call, before the first chunk: what is cut lazily is text
    already decoded, which cannot fail. Indexing a big file consumes its chunks a MiB at a
    time, so no list of every line, section and chunk of the file is held at once (at 16 MB
    such lists, out of cache, made reading grow ~5x for 4x the file).
    """
    chunks = _iter_chunks(path, root, kb, data, rel)
    return chunks if lazy else list(chunks)


def _iter_chunks(
    path: Path | str, root: Path, kb: str, data: bytes | None, rel: str | None
) -> Iterator[Chunk]:
    # Names as strings: a Path per file was a twentieth of indexing 1,000 small files.
    filename = os.path.basename(path)
    reader = _READERS.get(os.path.splitext(filename)[1].lower())
    if reader is None:
        return iter(())
    if rel is None:
        rel = relative_path(Path(path), root)
    try:
        pieces = reader(filename, Path(path).read_bytes() if data is None else data)
    except IngestError:
        raise
    except (OSError, ValueError) as exc:
        raise IngestError(f"{rel}: {type(exc).__name__}: {exc}") from exc
    return _chunks(pieces, rel, kb)


def _chunks(pieces: Iterable[_Piece], rel: str, kb: str) -> Iterator[Chunk]:
    kept = (p for p in pieces if p.text.strip())
    for n, p in enumerate(kept):
        yield Chunk(
            chunk_id=f"{rel}#{n}",
            kb=kb,
            path=rel,
            text=p.text.strip("\n"),
            title=p.title,
            cell=p.cell,
            page=p.page,
            kind=p.kind,
            line=p.line,
            cell_id=p.cell_id,
        )


# Share of control characters (other than whitespace) above which bytes that are not UTF-8
# count as binary: text in a legacy encoding has none, random bytes about one in ten.
_MAX_CONTROL = 0.01
_CONTROL = bytes(c for c in range(32) if chr(c) not in "\t\n\r\f\v\x1b")


def _read_text(name: str, data: bytes) -> str:
    """The file's bytes as text; IngestError when it is binary (a renamed image, an archive...)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 with a BOM (Windows Notepad)
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    if b"\x00" in data:
        raise IngestError(f"{name}: skipped, it is a binary file (NUL bytes), not text")
    try:
        return data.decode("utf-8-sig")  # drops a BOM
    except UnicodeDecodeError:
        pass
    controls = len(data) - len(data.translate(None, _CONTROL))
    if controls > _MAX_CONTROL * len(data):
        raise IngestError(f"{name}: skipped, it is not text (neither UTF-8 nor a legacy text)")
    # Not UTF-8 but text: most likely Windows' Western encoding; what it lacks becomes U+FFFD.
    return data.decode("cp1252", errors="replace")


def split_long(text: str, limit: int = MAX_CHUNK_CHARS) -> list[tuple[int, str]]:
    """``text`` cut into (offset, piece) parts of at most ``limit`` characters.

    Cuts fall on blank lines when possible, then on line ends, and only inside a line that is
    itself too long.
    """
    return list(_split_long(text, limit))


def _split_long(text: str, limit: int) -> Iterator[tuple[int, str]]:
    if len(text) <= limit:
        yield 0, text
        return
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = window.rfind("\n\n")
        if cut < limit // 3:
            cut = window.rfind("\n")
        if cut < limit // 3:
            cut = limit
        if (piece := text[start : start + cut]).strip():
            yield start, piece
        start += cut
    if (piece := text[start:]).strip():
        yield start, piece


def _pieces_with_lines(text: str, first_line: int, *, title: str, kind: str) -> list[_Piece]:
    return list(_iter_pieces_with_lines(text, first_line, title=title, kind=kind))


def _iter_pieces_with_lines(
    text: str, first_line: int, *, title: str, kind: str
) -> Iterator[_Piece]:
    # Lines are counted from the previous piece, not from the start: linear in the file's size.
    line, counted = first_line, 0
    for offset, piece in _split_long(text, MAX_CHUNK_CHARS):
        # A piece cut at a line end starts with newlines that chunks drop: count past them.
        start = offset + len(piece) - len(piece.lstrip("\n"))
        line += text.count("\n", counted, start)
        counted = start
        yield _Piece(piece, title, kind, line=line)


# --- Markdown -----------------------------------------------------------------------------------


def markdown_sections(text: str, stack: list[str]) -> list[tuple[int, str, str]]:
    """(0-based start line, heading path, section text) for each section of ``text``.

    ``stack`` is the heading path in force before ``text`` and is updated in place, so the
    headings of one notebook cell give the titles of the cells after it. Lines inside fenced
    code blocks are never headings (``# comment`` in a Python fence).
    """
    return list(_sections(text, stack))


_LINES_BLOCK = 1 << 16  # a big text is split into lines this many characters at a time


def _lines(text: str | bytes) -> Iterator[str]:
    """``text.splitlines()``, a block at a time: each block ends just after a "\\n", so no
    line break (not even "\\r\\n") is cut, and no list of every line of a big file is made.

    ``text`` may be ASCII bytes, each block decoded as it comes: the same lines, and no copy
    of the whole file as a str (a 16 MB one is 16 MB of fresh memory, ~4,000 page faults).
    """
    start = 0
    while start < len(text):
        if isinstance(text, str):
            end = text.find("\n", start + _LINES_BLOCK)
            end = len(text) if end < 0 else end + 1
            block = text[start:end]
        else:
            end = text.find(b"\n", start + _LINES_BLOCK)
            end = len(text) if end < 0 else end + 1
            block = text[start:end].decode("ascii")
        yield from block.splitlines()
        start = end


def _sections(text: str | bytes, stack: list[str]) -> Iterator[tuple[int, str, str]]:
    current: list[str] = []
    start, fence = 0, ""
    for number, line in enumerate(_lines(text)):
        first = line.lstrip(" ")[:1]
        if first not in _MARKS:  # most lines are prose: no regex for them
            current.append(line)
            continue
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if not fence:
                fence = marker[0] * len(marker)
            elif marker.startswith(fence):
                fence = ""
        heading = None if fence or fence_match else _HEADING.match(line)
        if heading:
            yield start, _title(stack), "\n".join(current)
            level = len(heading.group(1))
            del stack[level - 1 :]
            stack.extend([""] * (level - 1 - len(stack)))
            stack.append(heading.group(2).strip())
            current, start = [], number
        current.append(line)
    yield start, _title(stack), "\n".join(current)


def _title(stack: list[str]) -> str:
    # Skipped levels (a "###" straight under a "#") leave empty slots in the stack.
    return " > ".join(s for s in stack if s)


def _is_heading_only(body: str) -> bool:
    lines = [line for line in body.splitlines() if line.strip()]
    return len(lines) <= 1 and bool(lines) and bool(_HEADING.match(lines[0]))


def _read_markdown(name: str, data: bytes) -> Iterator[_Piece]:
    if data.isascii() and b"\0" not in data:  # most notes: decoded a block at a time
        return _markdown_pieces(name, data)
    text = _read_text(name, data)  # now: the one step that can fail
    return _markdown_pieces(name, text)


def _markdown_pieces(name: str, text: str | bytes) -> Iterator[_Piece]:
    for start, title, body in _sections(text, []):
        if _is_heading_only(body):
            continue  # its words live on in the titles of the sections below it
        yield from _iter_pieces_with_lines(body, start + 1, title=title or name, kind="markdown")


def _read_plain(name: str, data: bytes) -> Iterator[_Piece]:
    return _iter_pieces_with_lines(_read_text(name, data), 1, title=name, kind="text")


# --- Python -------------------------------------------------------------------------------------


def _read_python(name: str, data: bytes) -> list[_Piece]:
    source = _read_text(name, data)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _pieces_with_lines(source, 1, title=name, kind="python")
    lines = source.splitlines(keepends=True)
    pieces: list[_Piece] = []
    loose_start: int | None = None  # first line of a run of imports / assignments

    def flush(end: int) -> None:
        nonlocal loose_start
        if loose_start is not None:
            text = "".join(lines[loose_start - 1 : end])
            pieces.extend(_pieces_with_lines(text, loose_start, title=name, kind="python"))
        loose_start = None

    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            flush(first - 1)
            label = "class" if isinstance(node, ast.ClassDef) else "def"
            text = "".join(lines[first - 1 : node.end_lineno])
            title = f"{name} > {label} {node.name}"
            pieces += _pieces_with_lines(text, first, title=title, kind="python")
        elif loose_start is None:
            loose_start = first
    flush(len(lines))
    return pieces


# --- notebooks ----------------------------------------------------------------------------------


def _cell_source(cell: dict[str, object]) -> str:
    source = cell.get("source", "")
    return "".join(str(s) for s in source) if isinstance(source, list) else str(source)


def _read_notebook(name: str, data: bytes) -> list[_Piece]:
    try:
        notebook = json.loads(_read_text(name, data))
    except json.JSONDecodeError as exc:
        raise IngestError(f"{name}: not a valid notebook (JSON error: {exc})") from exc
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise IngestError(f"{name}: not an nbformat 4 notebook (no 'cells' list)")
    stack: list[str] = []
    pieces: list[_Piece] = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            continue
        source = _cell_source(cell)
        raw_id = cell.get("id")
        cell_id = raw_id if isinstance(raw_id, str) else None
        if cell.get("cell_type") == "markdown":
            # A heading-only cell is kept: it is still a cell a learner may look for.
            for _, title, body in markdown_sections(source, stack):
                for _, part in split_long(body):
                    pieces.append(_Piece(part, title or name, "markdown", None, index, cell_id))
        elif cell.get("cell_type") == "code":
            title = _title(stack) or name
            for _, part in split_long(source):
                pieces.append(_Piece(part, title, "code", None, index, cell_id))
    return pieces


# --- PDF ----------------------------------------------------------------------------------------


def _read_pdf(name: str, data: bytes) -> list[_Piece]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(f"{name}: the PDF is encrypted")
        texts = [page.extract_text() or "" for page in reader.pages]
    except PdfReadError as exc:
        raise IngestError(f"{name}: not a readable PDF ({exc})") from exc
    pieces: list[_Piece] = []
    for number, text in enumerate(texts, start=1):
        for _, part in split_long(text):
            pieces.append(_Piece(part, f"{name} p. {number}", "pdf", page=number))
    return pieces


_READERS: dict[str, Callable[[str, bytes], Iterable[_Piece]]] = {
    ".md": _read_markdown,
    ".markdown": _read_markdown,
    ".txt": _read_plain,
    ".py": _read_python,
    ".ipynb": _read_notebook,
    ".pdf": _read_pdf,
}
