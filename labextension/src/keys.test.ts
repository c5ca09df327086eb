import { describe, expect, it } from 'vitest';

import { indentEdit, keyAction } from './keys';

const none = { shift: false, ctrl: false, alt: false, meta: false };

describe('keys typed in a form', () => {
  it('stay in the form; Tab and Shift+Tab edit code boxes only; Escape leaves', () => {
    for (const key of ['a', 'b', 'm', 'r', 'y', '0', 'Enter', 'ArrowDown']) {
      expect(keyAction(key, none, true)).toBe('contain');
      expect(keyAction(key, { ...none, shift: true }, false)).toBe('contain');
    }
    expect(keyAction('Tab', none, true)).toBe('indent');
    expect(keyAction('Tab', { ...none, shift: true }, true)).toBe('dedent');
    expect(keyAction('Tab', none, false)).toBe('contain'); // moves focus, as in any form
    expect(keyAction('Tab', { ...none, ctrl: true }, true)).toBe('contain');
    expect(keyAction('Escape', none, true)).toBe('leave');
    expect(keyAction('Escape', none, false)).toBe('leave');
    // Save and the command palette still work mid-answer; other accelerators stay in the form.
    expect(keyAction('s', { ...none, ctrl: true }, true)).toBe('pass');
    expect(keyAction('s', { ...none, meta: true }, false)).toBe('pass');
    expect(keyAction('C', { ...none, ctrl: true, shift: true }, false)).toBe('pass');
    expect(keyAction('Enter', { ...none, ctrl: true }, false)).toBe('contain');
    expect(keyAction('c', { ...none, ctrl: true }, true)).toBe('contain');
  });

  it('Tab pads to the next multiple of four at the caret', () => {
    expect(indentEdit('def f():\nreturn 1', 9, 9, false)).toEqual({
      value: 'def f():\n    return 1',
      start: 13,
      end: 13
    });
    // Column 2 goes to 4.
    expect(indentEdit('ab', 2, 2, false)).toEqual({ value: 'ab  ', start: 4, end: 4 });
  });

  it('Tab indents every line of a selection, Shift+Tab dedents them', () => {
    const code = 'if x:\ny = 1\nz = 2\nw';
    const sel = indentEdit(code, 6, 17, false); // "y = 1\nz = 2"
    expect(sel.value).toBe('if x:\n    y = 1\n    z = 2\nw');
    expect(sel.value.slice(sel.start, sel.end)).toBe('y = 1\n    z = 2');
    const back = indentEdit(sel.value, sel.start, sel.end, true);
    expect(back.value).toBe(code);
  });

  it('Shift+Tab takes at most four spaces off the line at the caret, and stops at none', () => {
    expect(indentEdit('      x', 7, 7, true)).toEqual({ value: '  x', start: 3, end: 3 });
    expect(indentEdit('x', 1, 1, true)).toEqual({ value: 'x', start: 1, end: 1 });
    expect(indentEdit('a\n    b', 3, 3, true)).toEqual({ value: 'a\nb', start: 2, end: 2 });
  });
});
