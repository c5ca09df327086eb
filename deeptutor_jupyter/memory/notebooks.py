"""Read trace bundles back out of saved notebooks (the source for rebuilding L1)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from deeptutor_jupyter.memory.trace import TRACE_MIME, TraceRecord


@dataclass
class ImportResult:
    added: int = 0
    skipped_duplicates: int = 0
    notebooks: int = 0
    errors: list[str] = field(default_factory=list)


def find_notebooks(path: Path) -> list[Path]:
    """``path`` itself if it is a notebook, else every notebook below it except checkpoints."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"No notebook or folder at {path}")
    found = [p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found)


def trace_bundles(notebook: Path, errors: list[str]) -> Iterator[TraceRecord]:
    """Every valid trace record in ``notebook``; problems are appended to ``errors``."""
    try:
        nb = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        errors.append(f"{notebook}: not a readable notebook ({exc})")
        return
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        errors.append(f"{notebook}: no cells (only nbformat 4 notebooks are read)")
        return
    for index, cell in enumerate(cells):
        for payload in _payloads(cell):
            try:
                record = TraceRecord.model_validate(_as_mapping(payload))
            except (ValidationError, ValueError) as exc:
                first = str(exc).splitlines()[0]
                errors.append(f"{notebook}: cell {index}: invalid trace bundle ({first})")
                continue
            if not record.notebook:
                record.notebook = str(notebook)
            yield record


def _payloads(cell: Any) -> Iterator[Any]:
    outputs = cell.get("outputs") if isinstance(cell, dict) else None
    for output in outputs if isinstance(outputs, list) else []:
        data = output.get("data") if isinstance(output, dict) else None
        if isinstance(data, dict) and TRACE_MIME in data:
            yield data[TRACE_MIME]


def _as_mapping(payload: Any) -> Any:
    # Front ends may store a JSON mime value as a string (or a list of lines) instead of a dict.
    if isinstance(payload, list):
        payload = "".join(str(part) for part in payload)
    if isinstance(payload, str):
        return json.loads(payload)
    return payload
