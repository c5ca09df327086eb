import { afterEach, describe, expect, it } from 'vitest';
import { __, useBundle } from './i18n';

describe('__', () => {
  afterEach(() => useBundle(null));

  it('formats English with numbered placeholders', () => {
    expect(__('continues in %1, cell [%2]', 'a.ipynb', 3)).toBe('continues in a.ipynb, cell [3]');
    expect(__('100%1 done %3', 'x')).toBe('100x done %3');
  });

  it('uses the installed bundle', () => {
    useBundle({ __: (m: string) => `<${m}>` });
    expect(__('Stop')).toBe('<Stop>');
  });
});
