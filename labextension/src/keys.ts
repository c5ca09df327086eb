/**
 * Keys typed into the tutor's forms stay in the form (issue 21): a quiz's code box, an
 * ask_user answer, a setup field. JupyterLab runs notebook shortcuts from one keydown listener
 * on `document` (bubbling), so "a", "b", "m", "r", "y", "0 0" or Shift+Enter typed in a cell's
 * form inserted cells, turned the quiz's cell raw or restarted the kernel, and Tab left the
 * code box (ipywidgets' text boxes stop their own keys, but Tab moved the focus to the Submit
 * button, which does not). Each form root (the classes below, set by the kernel's widgets and
 * the panel) gets a keydown listener that stops the event before it leaves the root, except
 * Save and the command palette. Not `data-lm-suppress-shortcuts`: @lumino/commands honours it
 * for every binding, Save included. Tab and Shift+Tab indent and dedent in code boxes; Escape
 * leaves the form for the notebook (command mode).
 */

/** The roots of every form the tutor renders in a cell (kernel/widgets) or in the panel. */
export const FORM_ROOTS = [
  '.dt-turn',
  '.dt-quiz',
  '.dt-ask-user',
  '.dt-setup-card',
  '.dt-memory',
  '.dt-forget',
  '.dt-path',
  '.dt-pending',
  '.jp-DeepTutorQuiz'
].join(', ');

/** Plain code boxes: Tab indents, Shift+Tab dedents (other boxes keep Tab for moving on). With
 * JupyterLab's editor services, code boxes are its editor, with the same edit (codeeditor.ts). */
export const CODE_BOXES = '.dt-quiz-code textarea, textarea.jp-DeepTutorQuiz-code';

export const INDENT = '    ';

export interface Edit {
  value: string;
  start: number;
  end: number;
}

/**
 * Tab in a code box: with no selection, spaces up to the next multiple of four; with a selection
 * over lines, four spaces before each line. Shift+Tab: up to four leading spaces off each line
 * the caret or selection touches. Returns the new text and selection.
 */
export function indentEdit(value: string, start: number, end: number, dedent: boolean): Edit {
  const lineStart = value.lastIndexOf('\n', start - 1) + 1;
  if (!dedent && start === end) {
    const column = start - lineStart;
    const pad = ' '.repeat(INDENT.length - (column % INDENT.length));
    return {
      value: value.slice(0, start) + pad + value.slice(end),
      start: start + pad.length,
      end: start + pad.length
    };
  }
  // Every line the selection touches (a selection ending at a line's start leaves that line).
  const last = end > start && value[end - 1] === '\n' ? end - 1 : end;
  const blockEnd = value.indexOf('\n', last);
  const stop = blockEnd === -1 ? value.length : blockEnd;
  const lines = value.slice(lineStart, stop).split('\n');
  let newStart = start;
  let newEnd = end;
  let offset = lineStart;
  const changed = lines.map((line, i) => {
    let out: string;
    if (dedent) {
      const cut = line.length - line.replace(/^ {1,4}/, '').length;
      out = line.slice(cut);
      // The caret moves left with the text it was in, never before its line's start.
      if (i === 0) {
        newStart = Math.max(lineStart, start - cut);
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
  const text = changed.join('\n');
  return {
    value: value.slice(0, lineStart) + text + value.slice(stop),
    start: Math.min(newStart, newEnd),
    end: newEnd
  };
}

/** One replacement and the selection after it: what CodeMirror dispatches for Tab or Shift+Tab. */
export interface Change {
  from: number;
  to: number;
  insert: string;
  anchor: number;
  head: number;
}

/**
 * The code editor's Tab and Shift+Tab (codeeditor.ts): the same edit as a plain code box's
 * (`indentEdit`), as the smallest replacement, so undo and the caret behave as for typed text.
 * Null when nothing changes (Shift+Tab on an unindented line).
 */
export function indentChange(
  value: string,
  start: number,
  end: number,
  dedent: boolean
): Change | null {
  const edit = indentEdit(value, start, end, dedent);
  if (edit.value === value) {
    return null;
  }
  let from = 0;
  const limit = Math.min(value.length, edit.value.length);
  while (from < limit && value[from] === edit.value[from]) {
    from++;
  }
  let tail = 0;
  while (
    tail < limit - from &&
    value[value.length - 1 - tail] === edit.value[edit.value.length - 1 - tail]
  ) {
    tail++;
  }
  return {
    from,
    to: value.length - tail,
    insert: edit.value.slice(from, edit.value.length - tail),
    anchor: edit.start,
    head: edit.end
  };
}

/** What a key in a form does: stay in the form, indent or dedent code, leave the form, or
 * pass on to JupyterLab (only Save and the command palette: a learner saves mid-answer). */
export function keyAction(
  key: string,
  mods: { shift: boolean; ctrl: boolean; alt: boolean; meta: boolean },
  inCodeBox: boolean
): 'contain' | 'indent' | 'dedent' | 'leave' | 'pass' {
  if (key === 'Escape') {
    return 'leave';
  }
  const accel = mods.ctrl || mods.meta;
  if (
    accel &&
    !mods.alt &&
    (key.toLowerCase() === 's' || (mods.shift && key.toLowerCase() === 'c'))
  ) {
    return 'pass';
  }
  if (key === 'Tab' && inCodeBox && !mods.ctrl && !mods.alt && !mods.meta) {
    return mods.shift ? 'dedent' : 'indent';
  }
  return 'contain';
}

function applyIndent(box: HTMLTextAreaElement, dedent: boolean): void {
  const edit = indentEdit(box.value, box.selectionStart, box.selectionEnd, dedent);
  if (edit.value === box.value) {
    return;
  }
  box.setRangeText(edit.value, 0, box.value.length);
  box.setSelectionRange(edit.start, edit.end);
  // ipywidgets' Textarea and React's onChange both follow `input`: the kernel gets the text.
  box.dispatchEvent(new Event('input', { bubbles: true }));
}

/** Escape: focus back to the notebook, in command mode on the form's cell. */
function leave(target: HTMLElement): void {
  target.blur();
  const cell = target.closest<HTMLElement>('.jp-Cell');
  const notebook = target.closest<HTMLElement>('.jp-Notebook');
  (cell ?? notebook)?.focus({ preventScroll: true });
}

/** At the root, bubbling: nothing typed in the form goes further (ipywidgets' text boxes stop
 * their own keys already; buttons, radios and checkboxes did not, so after Tab left the code box
 * the next keys reached the notebook). */
function stop(event: KeyboardEvent): void {
  const mods = {
    shift: event.shiftKey,
    ctrl: event.ctrlKey,
    alt: event.altKey,
    meta: event.metaKey
  };
  if (keyAction(event.key, mods, false) !== 'pass') {
    event.stopPropagation();
  }
}

/** At capture, before the form's own handlers (which stop the event): Tab and Shift+Tab in a
 * code box, Escape anywhere in the form. */
function onCapturedKey(event: KeyboardEvent, target: HTMLElement): void {
  const box = target.closest<HTMLTextAreaElement>(CODE_BOXES);
  const action = keyAction(
    event.key,
    { shift: event.shiftKey, ctrl: event.ctrlKey, alt: event.altKey, meta: event.metaKey },
    box !== null && box === target
  );
  if (action === 'leave') {
    event.preventDefault();
    event.stopPropagation();
    leave(target);
  } else if ((action === 'indent' || action === 'dedent') && box !== null) {
    event.preventDefault();
    applyIndent(box, action === 'dedent');
  }
}

/** The root a keydown came from, once per root: the listener and the attribute. */
function contain(root: HTMLElement): void {
  if (root.dataset.dtKeys === 'contained') {
    return;
  }
  root.dataset.dtKeys = 'contained';
  root.addEventListener('keydown', stop);
}

/**
 * Watch the document's keydowns at capture: Tab, Shift+Tab and Escape are handled there, and a
 * key typed in a form root gives that root its listener before the event reaches it (a listener
 * added to a node the event has not reached yet runs for this very event), so the first key is
 * contained too, and forms rendered later (widgets, saved notebooks reopened) need no observer. The outermost root contains the key,
 * so a quiz inside a turn view stops the key at the turn's edge and nothing outside sees it.
 */
export function containFormKeys(doc: Document): () => void {
  const capture = (event: Event) => {
    const target = event.target;
    if (!(target instanceof HTMLElement)) {
      return;
    }
    let root: HTMLElement | null = null;
    for (let node = target.closest<HTMLElement>(FORM_ROOTS); node;) {
      root = node;
      node = node.parentElement?.closest<HTMLElement>(FORM_ROOTS) ?? null;
    }
    if (root) {
      contain(root);
      onCapturedKey(event as KeyboardEvent, target);
    }
  };
  doc.addEventListener('keydown', capture, true);
  return () => doc.removeEventListener('keydown', capture, true);
}
