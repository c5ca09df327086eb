import { describe, expect, it } from 'vitest';

import { insertionIndex, sameNotebook } from './cells';

describe('where the tutor inserts cells', () => {
  it('goes after the named cell, at an index, or at the end', () => {
    const ids = ['a', 'b', 'c'];
    expect(insertionIndex(ids, 'a', null)).toBe(1);
    expect(insertionIndex(ids, 'c', null)).toBe(3);
    expect(insertionIndex(ids, null, 0)).toBe(0);
    expect(insertionIndex(ids, null, null)).toBe(3);
  });

  it('refuses a cell that is not there or an index out of range', () => {
    expect(insertionIndex(['a'], 'gone', null)).toBeNull();
    expect(insertionIndex(['a'], null, 2)).toBeNull();
    expect(insertionIndex(['a'], null, -1)).toBeNull();
  });

  it("matches the kernel's notebook to the panel's path, not a namesake elsewhere", () => {
    expect(sameNotebook('week1/lesson.ipynb', 'week1/lesson.ipynb')).toBe(true);
    expect(sameNotebook('/home/me/week1/lesson.ipynb', 'week1/lesson.ipynb')).toBe(true);
    expect(sameNotebook('lesson.ipynb', 'week2/lesson.ipynb')).toBe(false);
    expect(sameNotebook('/x/mylesson.ipynb', 'lesson.ipynb')).toBe(false);
  });
});
