import { describe, expect, it } from 'vitest';

import { indentChange, indentEdit, keyAction } from './keys';

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

  it("the code editor's Tab and Shift+Tab are the same edit, as the smallest replacement", () => {
    const apply = (value: string, c: NonNullable<ReturnType<typeof indentChange>>) =>
      value.slice(0, c.from) + c.insert + value.slice(c.to);
    const code = 'def f(x):\n    return x';
    // Tab at the end of a line pads to the next multiple of four, there and nowhere else.
    const tab = indentChange(code, code.length, code.length, false)!;
    expect(tab).toEqual({ from: 22, to: 22, insert: '    ', anchor: 26, head: 26 });
    // Shift+Tab takes the line's four leading spaces off, and the caret moves with its text.
    const back = indentChange(apply(code, tab), 26, 26, true)!;
    expect(apply(apply(code, tab), back)).toBe('def f(x):\nreturn x    ');
    expect(back.to - back.from - back.insert.length).toBe(4);
    expect([back.anchor, back.head]).toEqual([22, 22]);
    // A selection over lines indents each of them; nothing to dedent is no change at all.
    const sel = indentChange('a\nb', 0, 3, false)!;
    expect(apply('a\nb', sel)).toBe('    a\n    b');
    expect([sel.anchor, sel.head]).toEqual([4, 11]);
    expect(indentChange('x = 1', 3, 3, true)).toBeNull();
  });
});
