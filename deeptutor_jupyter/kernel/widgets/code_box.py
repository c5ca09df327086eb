"""A quiz's code answer as a text box where Tab indents, in every Jupyter front end (issue 21).

ipywidgets' Textarea gives the kernel no key hook: where our labextension is absent (VS Code,
Colab, classic Notebook, JupyterLab with the extension disabled) Tab moved the focus out of the
box, so Python could not be indented. anywidget runs our own front-end module (code_box.js) in
each of those hosts from its own prebuilt extension: Tab and Shift+Tab indent and dedent, Enter
keeps the indentation (one level more after a colon), no key reaches the notebook's shortcuts,
Escape leaves. The module draws ipywidgets' Textarea DOM, so where the labextension is on, its
CodeMirror editor lies over this box as before. ``value`` is the text typed, synced both ways.

Imported only when a quiz has a code question: anywidget stays out of ``%load_ext``.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

__all__ = ["CodeBox"]


class CodeBox(anywidget.AnyWidget):
    _esm = Path(__file__).with_name("code_box.js")
    # The box fills the size the card gives it (over ipywidgets' own .widget-textarea rules, hence
    # two classes); code in the notebook's code font.
    _css = """
.dt-code-box.widget-textarea { width: 100%; height: 100%; box-sizing: border-box; }
.dt-code-box.widget-textarea > textarea {
  width: 100%; height: 100%; box-sizing: border-box; resize: vertical; tab-size: 4;
  font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 13px);
}
"""
    value = traitlets.Unicode("").tag(sync=True)
