import { describe, expect, it } from 'vitest';
import { docTitle } from './memorynames';

describe('docTitle', () => {
  it('names documents in words, not layers', () => {
    expect(docTitle('L3', 'profile')).toBe('About you');
    expect(docTitle('L3', 'preferences')).toBe('Your preferences');
    expect(docTitle('L2', 'quiz')).toBe('Notes from quizzes');
    expect(docTitle('L2', 'lab')).toBe('Notes: lab');
    const all = ['recent', 'profile', 'scope', 'preferences'].map(k => docTitle('L3', k));
    expect(all.concat(['chat', 'kb'].map(k => docTitle('L2', k))).join(' ')).not.toMatch(/L[23]/);
  });
});
