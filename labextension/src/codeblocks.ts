/**
 * Copy and "Insert into notebook" buttons on the code blocks of the panel's answers: the
 * learner takes the tutor's code into a cell without selecting it by hand.
 */
import { __ } from './i18n';

export interface CodeActions {
  copy(code: string): void;
  /** Null when no notebook is open (the scratch conversation): no Insert button then. */
  insert: ((code: string) => void) | null;
}

/** The code of a `<pre>` as the learner would type it: without the renderer's final newline. */
export function codeText(raw: string): string {
  return raw.replace(/\n$/, '');
}

/** Where inserted code goes: below the active cell, or at the end when there is none. */
export function insertionAt(activeIndex: number, count: number): number {
  return activeIndex >= 0 && activeIndex < count ? activeIndex + 1 : count;
}

function button(label: string, title: string, run: () => void): HTMLButtonElement {
  const b = document.createElement('button');
  b.className = 'jp-Button jp-mod-styled jp-mod-small jp-DeepTutorChat-codeButton';
  b.textContent = label;
  b.title = title;
  b.addEventListener('click', run);
  return b;
}

/** Give every code block under `root` its buttons (once). */
export function addCodeButtons(root: HTMLElement, actions: CodeActions): void {
  for (const pre of Array.from(root.querySelectorAll('pre'))) {
    if (pre.parentElement?.classList.contains('jp-DeepTutorChat-code')) {
      continue;
    }
    const box = document.createElement('div');
    box.className = 'jp-DeepTutorChat-code';
    const bar = document.createElement('div');
    bar.className = 'jp-DeepTutorChat-codeBar';
    const code = () => codeText(pre.textContent ?? '');
    bar.appendChild(button(__('Copy'), __('Copy this code'), () => actions.copy(code())));
    const insert = actions.insert;
    if (insert) {
      bar.appendChild(
        button(__('Insert'), __('Insert this code as a new cell below the active one'), () =>
          insert(code())
        )
      );
    }
    pre.replaceWith(box);
    box.append(bar, pre);
  }
}
