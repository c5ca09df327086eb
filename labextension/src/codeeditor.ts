/**
 * Code answers get JupyterLab's own CodeMirror editor (issue 21): Python highlighting, Enter
 * indents after a colon, Tab indents and Shift+Tab dedents (the same edit as a plain code box,
 * keys.ts `indentEdit`), Escape leaves the form (keys.ts, at capture, before the editor).
 *
 * The editor comes from IEditorServices, so the extension bundles no CodeMirror of its own
 * (@codemirror/state, view and language are JupyterLab's shared singletons). Two places use it:
 * the panel's quiz (quiz.tsx, through `mountCodeEditor`) and the cell's quiz card, whose code box
 * is the kernel's anywidget (kernel/widgets/code_box.js), drawn as ipywidgets' Textarea is
 * (`.widget-textarea.dt-quiz-code > textarea`): `upgradeCodeBoxes` puts an editor over each such
 * textarea and keeps the textarea as the widget's value, so what the kernel grades, saves and
 * consumes is what it was before, the text typed. Without this extension (nbclassic, VS Code,
 * Colab) the textarea stays, and indents on Tab by itself (code_box.js, docs/sidebar.md).
 */
import { CodeEditor, IEditorServices } from '@jupyterlab/codeeditor';
import { Prec } from '@codemirror/state';
import { EditorView, keymap } from '@codemirror/view';

import { indentChange } from './keys';

/** The cell quiz's code boxes, drawn as ipywidgets draws a Textarea (code_box.js). */
const CODE_BOX_CLASS = 'dt-quiz-code';
const CELL_CODE_BOXES = `.${CODE_BOX_CLASS} > textarea`;
/** Every ipywidgets Textarea's element (a quiz's code box is one of them). */
const TEXTAREA_WIDGETS = '.widget-textarea';
const PYTHON = 'text/x-python';

let services: IEditorServices | null = null;

/** Set once by the plugin; null leaves every code box a plain textarea. */
export function useEditorServices(editors: IEditorServices | null): void {
  services = editors;
}

export interface CodeEditorHandle {
  /** Replace the text (from outside: the model changed); no change event follows. */
  setText(text: string): void;
  dispose(): void;
}

function tabKeys(dedent: boolean) {
  return (view: EditorView): boolean => {
    const { from, to } = view.state.selection.main;
    const change = indentChange(view.state.doc.toString(), from, to, dedent);
    if (change) {
      view.dispatch({
        changes: { from: change.from, to: change.to, insert: change.insert },
        selection: { anchor: change.anchor, head: change.head },
        userEvent: dedent ? 'delete.dedent' : 'input.indent'
      });
    }
    return true; // handled either way: Tab never moves the focus out of a code answer
  };
}

/**
 * A Python editor in `host` holding `text`; `onChange` gets the whole text after each edit.
 * Null when JupyterLab gave no editor services.
 */
export function mountCodeEditor(
  host: HTMLElement,
  text: string,
  onChange: (text: string) => void
): CodeEditorHandle | null {
  if (!services) {
    return null;
  }
  const model = new CodeEditor.Model({ mimeType: PYTHON });
  model.sharedModel.setSource(text);
  let quiet = false;
  host.classList.add('jp-DeepTutorCode');
  const editor = services.factoryService.newInlineEditor({
    host,
    model,
    config: { lineNumbers: true, lineWrap: false, autoClosingBrackets: false }
  });
  editor.injectExtension(
    Prec.highest(keymap.of([{ key: 'Tab', run: tabKeys(false), shift: tabKeys(true) }]))
  );
  editor.injectExtension(
    EditorView.updateListener.of(update => {
      if (update.docChanged && !quiet) {
        onChange(update.state.doc.toString());
      }
    })
  );
  return {
    setText(next: string) {
      if (next !== model.sharedModel.getSource()) {
        quiet = true;
        try {
          model.sharedModel.setSource(next);
        } finally {
          quiet = false;
        }
      }
    },
    dispose() {
      editor.dispose();
      model.dispose();
    }
  };
}

/** The cell code boxes with an editor, till their widget view leaves the page. */
const upgraded = new Map<HTMLTextAreaElement, { handle: CodeEditorHandle; host: HTMLElement }>();

/**
 * An editor over one ipywidgets textarea. Edits go into the textarea and an `input` event, which
 * ipywidgets' Textarea sends to the kernel as typing does. The kernel's value reaches the
 * textarea by assignment (`textbox.value = …`, no event), so the element's own `value` setter
 * is wrapped to pass it on to the editor.
 */
function upgrade(box: HTMLTextAreaElement): void {
  if (box.dataset.dtEditor) {
    return;
  }
  const own = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value')!;
  const host = document.createElement('div');
  host.className = 'dt-code-editor';
  const handle = mountCodeEditor(host, box.value, text => {
    own.set!.call(box, text);
    box.dispatchEvent(new Event('input', { bubbles: true }));
  });
  if (!handle) {
    return;
  }
  box.dataset.dtEditor = 'codemirror';
  Object.defineProperty(box, 'value', {
    configurable: true,
    get: () => own.get!.call(box),
    set: (next: string) => {
      own.set!.call(box, next);
      handle.setText(String(next));
    }
  });
  box.style.display = 'none';
  box.insertAdjacentElement('beforebegin', host);
  upgraded.set(box, { handle, host });
}

/** A graded card replaces its form: the editors of boxes gone from the page are freed, and the
 * box is as ipywidgets made it, to be upgraded again if it comes back (a cell scrolled out of a
 * windowed notebook and back in). */
function sweep(): void {
  for (const [box, { handle, host }] of upgraded) {
    if (!box.isConnected) {
      upgraded.delete(box);
      handle.dispose();
      host.remove();
      Reflect.deleteProperty(box, 'value');
      box.style.display = '';
      delete box.dataset.dtEditor;
    }
  }
}

/** ipywidgets adds a view's classes (`dt-quiz-code` among them) once the view is on the page:
 * a textarea widget that arrives without it is watched, itself only, until it has it. */
function whenMarked(widget: HTMLElement): void {
  const marked = new MutationObserver(() => {
    if (widget.classList.contains(CODE_BOX_CLASS)) {
      marked.disconnect();
      widget.querySelectorAll<HTMLTextAreaElement>(CELL_CODE_BOXES).forEach(upgrade);
    }
  });
  marked.observe(widget, { attributes: true, attributeFilter: ['class'] });
}

function upgradeWithin(node: Node): void {
  if (!(node instanceof HTMLElement) || !node.firstElementChild) {
    return;
  }
  const widgets = node.matches(TEXTAREA_WIDGETS)
    ? [node]
    : node.querySelectorAll<HTMLElement>(TEXTAREA_WIDGETS);
  for (const widget of widgets) {
    if (widget.classList.contains(CODE_BOX_CLASS)) {
      widget.querySelectorAll<HTMLTextAreaElement>(CELL_CODE_BOXES).forEach(upgrade);
    } else {
      whenMarked(widget);
    }
  }
}

/**
 * Every cell quiz code box, now and later (widgets render when their output arrives, and again
 * when a notebook is reopened), gets the editor. Returns the stop function.
 */
export function upgradeCodeBoxes(root: HTMLElement): () => void {
  if (!services) {
    return () => undefined;
  }
  upgradeWithin(root);
  const watch = new MutationObserver(records => {
    let removed = false;
    for (const record of records) {
      record.addedNodes.forEach(upgradeWithin);
      removed ||= record.removedNodes.length > 0;
    }
    if (removed && upgraded.size) {
      sweep();
    }
  });
  watch.observe(root, { childList: true, subtree: true });
  return () => watch.disconnect();
}
