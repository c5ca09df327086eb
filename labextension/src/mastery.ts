/**
 * The mastery view's data (deeptutor_jupyter/server/mastery_api.py) and how its numbers read:
 * pure, so the words are tested without a server (mastery.test.ts).
 */
import { request } from './api';
import { MasteryObjective, MasteryReply } from './contracts';
import { __ } from './i18n';

export type { MasteryObjective, MasteryReply };

export function fetchMastery(): Promise<MasteryReply> {
  return request<MasteryReply>('mastery');
}

const DAY = 86400;

/** "62 %", or a dash before any graded answer. */
export function masteryText(objective: MasteryObjective): string {
  return objective.mastery === null ? '\u2013' : `${Math.round(objective.mastery * 100)} %`;
}

/** When the objective's next review is due, in days from `now` (epoch seconds). */
export function reviewText(due: number | null, now: number): string {
  if (due === null) {
    return __('no review yet');
  }
  const days = Math.ceil((due - now) / DAY);
  if (days <= 0) {
    return __('review due now');
  }
  return days === 1 ? __('review tomorrow') : __('review in %1 days', days);
}

/** The status word of an objective. */
export function statusText(status: MasteryObjective['status']): string {
  const words: Record<MasteryObjective['status'], string> = {
    mastered: __('mastered'),
    open: __('working on it'),
    locked: __('later'),
    other: __('from a quiz')
  };
  return words[status];
}

/** Nothing to show: no learning path and no quiz graded yet. */
export function isEmpty(reply: MasteryReply): boolean {
  return reply.topic === null && reply.objectives.length === 0;
}
