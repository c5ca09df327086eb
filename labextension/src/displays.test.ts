import { describe, expect, it } from 'vitest';

import { VIEW_MIME, displayIdOf, withoutDeadWidget } from './displays';

const WIDGET = 'application/vnd.jupyter.widget-view+json';

describe('after a kernel restart', () => {
  it('shows a tutor output as its Markdown, without the dead widget', () => {
    const data = {
      [WIDGET]: { model_id: 'abc' },
      [VIEW_MIME]: { fallback: 'text/markdown' },
      'text/markdown': 'Waiting for your answer: run `%tutor pending`',
      'text/plain': 'Waiting'
    };
    const settled = withoutDeadWidget(data);
    expect(settled).not.toBeNull();
    expect(Object.keys(settled ?? {})).not.toContain(WIDGET);
    expect(settled?.['text/markdown']).toContain('%tutor pending');
  });

  it('keeps a widget the kernel still holds (a page reload) and settles one it does not', () => {
    const data = {
      [WIDGET]: { model_id: 'abc' },
      [VIEW_MIME]: { fallback: 'text/markdown' },
      'text/markdown': 'The answer'
    };
    expect(withoutDeadWidget(data, new Set(['abc']))).toBeNull();
    expect(withoutDeadWidget(data, new Set(['other']))?.['text/markdown']).toBe('The answer');
    expect(withoutDeadWidget(data, new Set())).not.toBeNull(); // no kernel, or a new one
  });

  it('leaves every other output alone', () => {
    expect(withoutDeadWidget({ [WIDGET]: { model_id: 'x' }, 'text/plain': 'Slider' })).toBeNull();
    expect(withoutDeadWidget({ 'text/markdown': '# plain' })).toBeNull();
  });
});

describe('after a page reload', () => {
  it('finds a tutor output by the display id its marker carries', () => {
    expect(displayIdOf({ [VIEW_MIME]: { display_id: 'turn-1' } })).toBe('turn-1');
    expect(displayIdOf({ [VIEW_MIME]: { fallback: 'text/markdown' } })).toBeNull();
    expect(displayIdOf({ 'text/plain': 'x' })).toBeNull();
  });
});
