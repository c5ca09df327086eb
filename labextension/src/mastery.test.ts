import { describe, expect, it } from 'vitest';

import { isEmpty, masteryText, reviewText, statusText } from './mastery';
import { MasteryObjective } from './contracts';

const objective: MasteryObjective = {
  id: 'rank',
  title: 'The rank $r(A)$',
  status: 'open',
  mastery: 0.624,
  answers: 3,
  confidence: 'some evidence',
  review_due: null
};

describe('the mastery view', () => {
  it('says mastery in percent, and a dash before any graded answer', () => {
    expect(masteryText(objective)).toBe('62 %');
    expect(masteryText({ ...objective, mastery: null })).toBe('\u2013');
  });

  it('says when the next review is due, in days', () => {
    const now = 1_000_000;
    expect(reviewText(null, now)).toBe('no review yet');
    expect(reviewText(now - 5, now)).toBe('review due now');
    expect(reviewText(now + 3600, now)).toBe('review tomorrow');
    expect(reviewText(now + 3 * 86400, now)).toBe('review in 3 days');
  });

  it('names each status in words', () => {
    expect(statusText('open')).toBe('working on it');
    expect(statusText('other')).toBe('from a quiz');
  });

  it('is empty only without a path and without objectives', () => {
    const none = { topic: null, objectives: [], next: null, due_now: 0 };
    expect(isEmpty(none)).toBe(true);
    expect(isEmpty({ ...none, objectives: [{ ...objective, status: 'other' as const }] })).toBe(
      false
    );
  });
});
