"""Real files for the knowledge tests: a tiny PDF writer and a notebook writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _pdf_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A valid PDF with one line of Helvetica text per page (ASCII), readable by pypdf."""
    objects: list[str] = []
    n_pages = len(pages)
    font_id = 3 + 2 * n_pages
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n_pages))
    objects.append("<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>")
    for i, text in enumerate(pages):
        content = f"BT /F1 12 Tf 72 720 Td ({_pdf_string(text)}) Tj ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {4 + 2 * i} 0 R >>"
        )
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    out += trailer.encode()
    path.write_bytes(bytes(out))
    return path


def write_notebook(path: Path, cells: list[tuple[str, str]], *, ids: bool = True) -> Path:
    """An nbformat 4.5 notebook from (cell_type, source) pairs; cell ids ``c0``, ``c1``..."""
    body: list[dict[str, Any]] = []
    for n, (kind, source) in enumerate(cells):
        cell: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": source}
        if ids:
            cell["id"] = f"c{n}"
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        body.append(cell)
    notebook = {"cells": body, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


def index_file(folder: Path, name: str) -> Path:
    """The file that holds part ``name`` of the index (``base``, ``delta``, ``vocab``) now,
    as the manifest names it."""
    from deeptutor_jupyter.knowledge.storage import index_names

    manifest = json.loads((folder / "manifest.json").read_bytes())
    return folder / "index" / index_names(manifest)[name]


def file_table(folder: Path) -> dict[str, list[Any]]:
    """The knowledge base's file table, its pieces (``tables/``) joined, by column."""
    manifest = json.loads((folder / "manifest.json").read_bytes())
    out: dict[str, list[Any]] = {}
    for name, _digest, _count in manifest["shards"].values():
        for column, values in json.loads((folder / "tables" / name).read_bytes()).items():
            out.setdefault(column, []).extend(values)
    return out


def file_entries(folder: Path) -> dict[str, dict[str, Any]]:
    """The knowledge base's file table as one dict per file, by path."""
    table = file_table(folder)
    names = [name for name in table if name != "path"]
    return {path: {name: table[name][i] for name in names} for i, path in enumerate(table["path"])}
