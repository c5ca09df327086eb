import { describe, expect, it } from 'vitest';

import {
  CELLS_MIME,
  CONTENTS_MIME,
  MAX_CHIPS,
  addChips,
  attachmentsFromDrop,
  canDrop,
  cellAttachment,
  chipLabel,
  errorOf,
  markChip,
  quoteAttachment,
  removeChip
} from './context';

const failing = {
  cell_type: 'code',
  execution_count: 3,
  source: ['x = 1\n', '1 / 0'],
  outputs: [
    { output_type: 'stream', name: 'stdout', text: 'hi' },
    {
      output_type: 'error',
      ename: 'ZeroDivisionError',
      evalue: 'division by zero',
      traceback: ['\u001b[0;31mZeroDivisionError\u001b[0m Traceback', 'division by zero']
    }
  ]
};

function drag(data: Record<string, unknown>) {
  return {
    hasData: (mime: string) => mime in data,
    getData: (mime: string) => data[mime]
  };
}

describe('context from the notebook', () => {
  it('reads the error without colours', () => {
    expect(errorOf(failing)).toBe('ZeroDivisionError Traceback\ndivision by zero');
    expect(errorOf({ cell_type: 'code', source: 'x', outputs: [] })).toBeNull();
  });

  it('attaches a cell by the [N] the learner sees, with what it shows as a stand-in', () => {
    expect(cellAttachment(failing)).toEqual({
      kind: 'cell',
      number: 3,
      cell_type: 'code',
      source: 'x = 1\n1 / 0',
      error: 'ZeroDivisionError Traceback\ndivision by zero'
    });
    const notRun = cellAttachment({ cell_type: 'code', source: 'y', execution_count: null });
    expect(notRun).toMatchObject({ number: null, source: 'y', error: '' });
    const markdown = cellAttachment({ cell_type: 'markdown', source: '# Intro' });
    expect(markdown).toMatchObject({ number: null, cell_type: 'markdown' });
  });

  it('makes a quote of a selection, none of an empty one', () => {
    expect(quoteAttachment('np.dot(a, b)', 2)).toEqual({
      kind: 'quote',
      text: 'np.dot(a, b)',
      number: 2
    });
    expect(quoteAttachment('  \n', 2)).toBeNull();
  });
});

describe('dropping on the chat', () => {
  it('takes cells dragged from a notebook, skipping empty ones', () => {
    const data = drag({
      [CELLS_MIME]: [failing, { cell_type: 'code', source: '', execution_count: 4 }],
      'text/plain': 'x = 1'
    });
    expect(canDrop(data)).toBe(true);
    const got = attachmentsFromDrop(data);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ kind: 'cell', number: 3 });
  });

  it('takes paths dragged from the file browser', () => {
    const data = drag({ [CONTENTS_MIME]: ['data/notes.md', 'week1/lesson.ipynb', 7, ''] });
    expect(attachmentsFromDrop(data)).toEqual([
      { kind: 'file', path: 'data/notes.md' },
      { kind: 'file', path: 'week1/lesson.ipynb' }
    ]);
    expect(attachmentsFromDrop(drag({ [CONTENTS_MIME]: 'one.txt' }))).toEqual([
      { kind: 'file', path: 'one.txt' }
    ]);
  });

  it('ignores drags it cannot use, and malformed cells', () => {
    expect(canDrop(drag({ 'text/plain': 'hello' }))).toBe(false);
    expect(attachmentsFromDrop(drag({ 'text/plain': 'hello' }))).toEqual([]);
    expect(attachmentsFromDrop(drag({ [CELLS_MIME]: 'nonsense' }))).toEqual([]);
    expect(attachmentsFromDrop(drag({ [CELLS_MIME]: [{ source: 'no type' }, null] }))).toEqual([]);
  });
});

describe('the chip list', () => {
  const file = { kind: 'file' as const, path: 'data/notes.md' };
  const cell = cellAttachment(failing);

  it('adds without duplicates and keeps the order', () => {
    let chips = addChips([], [cell, file]);
    chips = addChips(chips, [{ kind: 'file', path: '/data/notes.md' }, cell]);
    expect(chips.map(c => chipLabel(c.attachment))).toEqual(['Cell [3]', 'notes.md']);
  });

  it('stops at the most the kernel takes', () => {
    const many = Array.from({ length: 14 }, (_, i) => ({ kind: 'file' as const, path: `f${i}` }));
    const chips = addChips([], many);
    expect(chips).toHaveLength(MAX_CHIPS);
    expect(chips[0].attachment).toEqual({ kind: 'file', path: 'f0' });
  });

  it('removes one chip and marks the one the kernel refused', () => {
    const chips = addChips(
      [],
      [cell, file, { kind: 'quote', text: 'a long selected line of code' }]
    );
    expect(removeChip(chips, 1).map(c => c.attachment.kind)).toEqual(['cell', 'quote']);
    const marked = markChip(chips, 1, 'data/notes.md is not a text file.');
    expect(marked[1].error).toBe('data/notes.md is not a text file.');
    expect(marked[0].error).toBeUndefined();
    expect(chipLabel(chips[2].attachment)).toBe('\u201ca long selected line of code\u201d');
  });

  it('names cells that did not run by what they show', () => {
    expect(
      chipLabel({ kind: 'cell', number: null, cell_type: 'markdown', source: '# Intro' })
    ).toBe('Markdown cell: # Intro');
    expect(chipLabel({ kind: 'cell', number: null, cell_type: 'code', source: 'x = 1' })).toBe(
      'Cell (not run): x = 1'
    );
  });
});
