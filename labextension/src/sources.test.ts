import { describe, expect, it } from 'vitest';
import { sourceList } from './sources';

const hits = [
  { chunk_id: 'a', n: 1, file: 'week1.md', path: '/c/week1.md', title: 'Rank' },
  { chunk_id: 'b', n: 2, file: 'lab.ipynb', path: '/c/lab.ipynb', cell: 2 },
  { chunk_id: 'a', n: 1, file: 'week1.md', path: '/c/week1.md', title: 'Rank' }
];

describe('sourceList', () => {
  it('lists the passages the answer cites, numbered as its [n]', () => {
    const list = sourceList(hits, 'The rank counts pivots [2].');
    expect(list.heading).toBe('Sources');
    expect(list.items).toEqual([{ n: 2, label: 'lab.ipynb, cell 3', path: '/c/lab.ipynb' }]);
  });
  it('lists every passage read, once, when the answer cites none', () => {
    const list = sourceList(hits, 'See [the docs](https://x.org) [9].');
    expect(list.heading).toBe('Passages the tutor read (none cited)');
    expect(list.items.map(i => i.label)).toEqual(['week1.md · Rank', 'lab.ipynb, cell 3']);
  });
});
