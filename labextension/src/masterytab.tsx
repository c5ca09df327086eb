/**
 * The Progress tab: the learner's objectives with mastery and next review (mastery.ts), read-only.
 * Objective titles are Markdown with LaTeX, rendered by the panel's own renderer (`renderText`).
 */
import * as React from 'react';

import { __ } from './i18n';
import { fetchMastery, isEmpty, masteryText, reviewText, statusText } from './mastery';
import { RefreshBar } from './refreshbar';
import { useLoad } from './tabs';

function dueText(due: number): string {
  if (due === 0) {
    return __('No review is due now.');
  }
  return due === 1
    ? __('One review card is due now: run %1 in a cell.', '%tutor review')
    : __('%1 review cards are due now: run %2 in a cell.', due, '%tutor review');
}

export function MasteryTab(props: {
  renderText: (text: string) => React.ReactElement;
}): React.ReactElement {
  const [reply, error, load] = useLoad(fetchMastery);
  const now = Date.now() / 1000;
  return (
    <div className="jp-DeepTutorMastery">
      <RefreshBar onRefresh={load} error={error} />
      {reply && isEmpty(reply) ? (
        <div className="jp-DeepTutorPanel-empty">
          <p>{__('No learning path yet.')}</p>
          <p>
            {__(
              'Start one with %1 in a notebook cell, or ask the tutor for a quiz; your objectives and their mastery show here.',
              '%tutor learn <topic>'
            )}
          </p>
        </div>
      ) : null}
      {reply && !isEmpty(reply) ? (
        <>
          <div className="jp-DeepTutorMastery-topic">
            {reply.topic ? __('Learning path: %1', reply.topic) : __('No learning path yet.')}
          </div>
          <ol className="jp-DeepTutorMastery-objectives">
            {reply.objectives.map(o => (
              <li key={o.id} className={`jp-DeepTutorMastery-objective jp-mod-${o.status}`}>
                <div className="jp-DeepTutorMastery-title">{props.renderText(o.title)}</div>
                <div className="jp-DeepTutorMastery-numbers">
                  <span className="jp-DeepTutorMastery-status">{statusText(o.status)}</span>
                  <span className="jp-DeepTutorMastery-value">{masteryText(o)}</span>
                  <span className="jp-DeepTutorMastery-review">
                    {reviewText(o.review_due, now)}
                  </span>
                </div>
                <meter min={0} max={1} value={o.mastery ?? 0} aria-label={masteryText(o)} />
              </li>
            ))}
          </ol>
          <div className="jp-DeepTutorMastery-footer">{dueText(reply.due_now)}</div>
        </>
      ) : null}
    </div>
  );
}
