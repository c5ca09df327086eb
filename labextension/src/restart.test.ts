import { describe, expect, it } from 'vitest';

import { VIEW_MIME, withoutDeadWidget } from './restart';

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

  it('leaves every other output alone', () => {
    expect(withoutDeadWidget({ [WIDGET]: { model_id: 'x' }, 'text/plain': 'Slider' })).toBeNull();
    expect(withoutDeadWidget({ 'text/markdown': '# plain' })).toBeNull();
  });
});
