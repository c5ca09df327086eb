import { describe, expect, it } from 'vitest';

import { aboutCellDraft, errorOf, explainErrorQuestion } from './context';

const failing = {
  cell_type: 'code',
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

describe('questions from the notebook', () => {
  it('reads the error without colours', () => {
    expect(errorOf(failing)).toBe('ZeroDivisionError Traceback\ndivision by zero');
    expect(errorOf({ cell_type: 'code', source: 'x', outputs: [] })).toBeNull();
  });

  it('sends the source and the traceback with "Explain this error"', () => {
    const question = explainErrorQuestion(failing, 2) ?? '';
    expect(question).toContain('cell [3]');
    expect(question).toContain('```python\nx = 1\n1 / 0\n```');
    expect(question).toContain('ZeroDivisionError Traceback');
    expect(explainErrorQuestion({ cell_type: 'code', source: 'x' }, 0)).toBeNull();
  });

  it('quotes a cell for a question still to type, fencing around backticks', () => {
    const draft = aboutCellDraft({ cell_type: 'markdown', source: 'Use ``` fences' }, 0);
    expect(draft).toBe('About cell [1]:\n````\nUse ``` fences\n````\n\n');
  });
});
