import { describe, expect, it } from 'vitest';

import { onlyVersionDiffers } from './language';

const SAVED = {
  codemirror_mode: { name: 'ipython', version: 3 },
  file_extension: '.py',
  mimetype: 'text/x-python',
  name: 'python',
  nbconvert_exporter: 'python',
  pygments_lexer: 'ipython3',
  version: '3.11.7'
};

describe('a kernel on another Python version', () => {
  it('is only a version change when nothing else differs', () => {
    expect(onlyVersionDiffers(SAVED, { ...SAVED, version: '3.12.1' })).toBe(true);
  });

  it('is a real change when the language or its mode differs', () => {
    expect(onlyVersionDiffers(SAVED, { ...SAVED, name: 'R', version: '4.3.0' })).toBe(false);
    expect(
      onlyVersionDiffers(SAVED, { ...SAVED, codemirror_mode: { name: 'ipython', version: 2 } })
    ).toBe(false);
    expect(onlyVersionDiffers(SAVED, { ...SAVED, pygments_lexer: undefined })).toBe(false);
  });

  it('is no change at all when the versions are equal', () => {
    expect(onlyVersionDiffers(SAVED, { ...SAVED })).toBe(false);
  });

  it('is new information when the file recorded no language', () => {
    expect(onlyVersionDiffers(undefined, SAVED)).toBe(false);
    expect(onlyVersionDiffers(null, SAVED)).toBe(false);
  });
});
