import { describe, expect, it } from 'vitest';
import { codeText, insertionAt } from './codeblocks';

describe('code blocks', () => {
  it('take the code without the final newline the renderer adds', () => {
    expect(codeText('x = 1\nprint(x)\n')).toBe('x = 1\nprint(x)');
    expect(codeText('a\n\n')).toBe('a\n');
  });
  it('insert below the active cell, or at the end without one', () => {
    expect(insertionAt(2, 5)).toBe(3);
    expect(insertionAt(-1, 5)).toBe(5);
    expect(insertionAt(7, 5)).toBe(5);
  });
});
