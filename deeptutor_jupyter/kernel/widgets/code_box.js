// A quiz's code answer that indents where our labextension is absent (VS Code, Colab, classic
// Notebook, JupyterLab with the extension disabled): anywidget runs this module in each of them.
// ipywidgets' own Textarea gives the kernel no key hook, so Tab left the box (issue 21).
//
// The DOM is ipywidgets' Textarea's, `.widget-textarea.dt-quiz-code > textarea`: where the
// labextension is on, it lays JupyterLab's editor over this textarea (codeeditor.ts), writes each
// edit into it with an `input` event and assigns the kernel's value to it, as it does for
// ipywidgets' box; the textarea stays the answer either way, so the text typed is what is graded.
// The indent rule is the labextension's (keys.ts `indentEdit`), written again here because this
// module is all a host without the extension gets.

const INDENT = "    ";

/** Tab: spaces to the next multiple of four, or four before each selected line; Shift+Tab: up
 * to four leading spaces off each line the caret or selection touches. */
export function indentEdit(value, start, end, dedent) {
  const lineStart = value.lastIndexOf("\n", start - 1) + 1;
  if (!dedent && start === end) {
    const pad = " ".repeat(INDENT.length - ((start - lineStart) % INDENT.length));
    const caret = start + pad.length;
    return { value: value.slice(0, start) + pad + value.slice(end), start: caret, end: caret };
  }
  // A selection ending at a line's start leaves that line alone.
  const last = end > start && value[end - 1] === "\n" ? end - 1 : end;
  const blockEnd = value.indexOf("\n", last);
  const stop = blockEnd === -1 ? value.length : blockEnd;
  let newStart = start;
  let newEnd = end;
  let offset = lineStart;
  const lines = value.slice(lineStart, stop).split("\n").map((line, i) => {
    let out;
    if (dedent) {
      const cut = line.length - line.replace(/^ {1,4}/, "").length;
      out = line.slice(cut);
      if (i === 0) {
        newStart = Math.max(lineStart, start - cut); // never before its line's start
      }
      newEnd -= Math.min(cut, Math.max(0, end - offset));
    } else {
      out = INDENT + line;
      if (i === 0) {
        newStart = start + INDENT.length;
      }
      newEnd += INDENT.length;
    }
    offset += line.length + 1;
    return out;
  });
  return {
    value: value.slice(0, lineStart) + lines.join("\n") + value.slice(stop),
    start: Math.min(newStart, newEnd),
    end: newEnd,
  };
}

/** Enter: a new line at the current line's indentation, one level more after a colon. */
export function newlineEdit(value, start, end) {
  const line = value.slice(value.lastIndexOf("\n", start - 1) + 1, start);
  const pad = /^[ \t]*/.exec(line)[0] + (/:\s*$/.test(line) ? INDENT : "");
  const caret = start + 1 + pad.length;
  return { value: value.slice(0, start) + "\n" + pad + value.slice(end), start: caret, end: caret };
}

function apply(box, edit) {
  if (edit.value === box.value) {
    return;
  }
  box.setRangeText(edit.value, 0, box.value.length);
  box.setSelectionRange(edit.start, edit.end);
  box.dispatchEvent(new Event("input", { bubbles: true })); // as typing: the model follows
}

/** Escape: the focus back to the notebook's cell, where the host has one. */
function leave(box) {
  box.blur();
  box.closest(".jp-Cell, .cell")?.focus({ preventScroll: true });
}

/** A keydown in the box (exported for the labextension's vitest, codebox.test.ts). */
export function onKey(event, box) {
  const accel = event.ctrlKey || event.metaKey;
  const key = event.key.toLowerCase();
  if (accel && !event.altKey && (key === "s" || (event.shiftKey && key === "c"))) {
    return; // Save and the command palette still reach the notebook, as in the labextension
  }
  // Nothing else does: "a", "b", "m", "y", "0 0", Shift+Enter are text, not notebook commands.
  event.stopPropagation();
  if (event.defaultPrevented || event.isComposing) {
    return; // the labextension's keys.ts handled it (at capture), or an input method has it
  }
  if (event.key === "Escape") {
    event.preventDefault();
    leave(box);
    return;
  }
  if (event.altKey || accel) {
    return; // the textarea's own: undo, copy, a word left…
  }
  const { value, selectionStart: start, selectionEnd: end } = box;
  if (event.key === "Tab") {
    event.preventDefault();
    apply(box, indentEdit(value, start, end, event.shiftKey));
  } else if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    apply(box, newlineEdit(value, start, end));
  }
}

function render({ model, el }) {
  const shell = document.createElement("div");
  // ipywidgets' textarea look (border, padding, colours) without its margin, which overflowed.
  shell.className = "widget-inline-hbox widget-textarea dt-quiz-code dt-code-box";
  const box = document.createElement("textarea");
  box.className = "widget-input";
  box.spellcheck = false;
  box.setAttribute("autocapitalize", "off");
  box.value = model.get("value");
  box.addEventListener("input", () => {
    model.set("value", box.value);
    model.save_changes();
  });
  box.addEventListener("keydown", (event) => onKey(event, box));
  const shown = () => {
    const next = model.get("value");
    if (box.value !== next) {
      box.value = next; // an assignment, as ipywidgets makes: the labextension's editor follows
    }
  };
  model.on("change:value", shown);
  shell.append(box);
  el.append(shell); // whole: the labextension looks for the textarea when the shell arrives
  return () => model.off("change:value", shown);
}

export default { render };
