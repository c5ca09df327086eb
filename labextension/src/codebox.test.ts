/**
 * The kernel's code box (deeptutor_jupyter/kernel/widgets/code_box.js), the code answer where this
 * extension is absent: its indent rule is keys.ts `indentEdit` written again (the module is all a
 * host without this extension gets), so the two are held to the same edits here, and its keydown
 * handler is run against a stand-in textarea (no DOM in these tests).
 */
import { describe, expect, it } from 'vitest';

import { Edit, indentEdit } from './keys';

interface Box {
  value: string;
  selectionStart: number;
  selectionEnd: number;
  inputs: number;
  blurred: boolean;
  focusedCell: boolean;
  setRangeText(text: string, start: number, end: number): void;
  setSelectionRange(start: number, end: number): void;
  dispatchEvent(event: Event): boolean;
  blur(): void;
  closest(selector: string): { focus(): void } | null;
}

interface CodeBoxModule {
  indentEdit(value: string, start: number, end: number, dedent: boolean): Edit;
  newlineEdit(value: string, start: number, end: number): Edit;
  onKey(event: unknown, box: Box): void;
}

const MODULE = new URL('../../deeptutor_jupyter/kernel/widgets/code_box.js', import.meta.url);
const codeBox = (await import(/* @vite-ignore */ MODULE.href)) as CodeBoxModule;

function box(value: string, start: number, end = start): Box {
  const b: Box = {
    value,
    selectionStart: start,
    selectionEnd: end,
    inputs: 0,
    blurred: false,
    focusedCell: false,
    setRangeText(text, from, to) {
      b.value = b.value.slice(0, from) + text + b.value.slice(to);
    },
    setSelectionRange(from, to) {
      b.selectionStart = from;
      b.selectionEnd = to;
    },
    dispatchEvent(event) {
      b.inputs += event.type === 'input' ? 1 : 0;
      return true;
    },
    blur() {
      b.blurred = true;
    },
    closest: () => ({
      focus() {
        b.focusedCell = true;
      }
    })
  };
  return b;
}

function press(b: Box, key: string, mods: Record<string, boolean> = {}) {
  const seen = { stopped: false, prevented: false };
  codeBox.onKey(
    {
      key,
      shiftKey: false,
      ctrlKey: false,
      metaKey: false,
      altKey: false,
      isComposing: false,
      defaultPrevented: false,
      ...mods,
      stopPropagation: () => (seen.stopped = true),
      preventDefault: () => (seen.prevented = true)
    },
    b
  );
  return seen;
}

describe('the code box drawn where this extension is absent', () => {
  it('indents and dedents as the extension does', () => {
    const code = 'if x:\n  y = 1\n      z = 2\nw';
    for (let start = 0; start <= code.length; start++) {
      for (const end of [start, Math.min(code.length, start + 7), code.length]) {
        for (const dedent of [false, true]) {
          expect(codeBox.indentEdit(code, start, end, dedent)).toEqual(
            indentEdit(code, start, end, dedent)
          );
        }
      }
    }
  });

  it('Enter keeps the indentation, one level more after a colon', () => {
    expect(codeBox.newlineEdit('def f(x):', 9, 9)).toEqual({
      value: 'def f(x):\n    ',
      start: 14,
      end: 14
    });
    expect(codeBox.newlineEdit('    y = 1', 9, 9).value).toBe('    y = 1\n    ');
    expect(codeBox.newlineEdit('ab', 1, 2).value).toBe('a\n');
  });

  it('keeps every key from the notebook but Save and the palette; Tab edits, Escape leaves', () => {
    const b = box('def f():\nreturn 1', 9);
    expect(press(b, 'a')).toEqual({ stopped: true, prevented: false }); // typed as text
    expect(press(b, 'Enter', { ctrlKey: true })).toEqual({ stopped: true, prevented: false });
    expect(press(b, 's', { ctrlKey: true }).stopped).toBe(false);
    expect(press(b, 'C', { metaKey: true, shiftKey: true }).stopped).toBe(false);
    expect(press(b, 'Tab')).toEqual({ stopped: true, prevented: true });
    expect([b.value, b.selectionStart, b.inputs]).toEqual(['def f():\n    return 1', 13, 1]);
    press(b, 'Tab', { shiftKey: true });
    expect([b.value, b.selectionStart, b.inputs]).toEqual(['def f():\nreturn 1', 9, 2]);
    // keys.ts indented at capture already (its own code box rule): no second indent here.
    expect(press(b, 'Tab', { defaultPrevented: true }).stopped).toBe(true);
    expect(b.value).toBe('def f():\nreturn 1');
    press(b, 'Escape');
    expect([b.blurred, b.focusedCell]).toEqual([true, true]);
  });
});
