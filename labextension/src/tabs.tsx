/**
 * The panel's tabs that read through the server extension: Pending, Memory and Knowledge.
 */
import * as React from 'react';

import { ApiError, answerPending, fetchPending } from './api';
import { KernelChat } from './chat';
import { AskUserCard } from './form';
import { __ } from './i18n';
import { PendingQuestion, Submission } from './protocol';
import { reasonText } from './errors';

function useLoad<T>(load: () => Promise<T>): [T | null, string, () => void] {
  const [value, setValue] = React.useState<T | null>(null);
  const [error, setError] = React.useState('');
  const reload = React.useCallback(() => {
    load().then(
      v => {
        setValue(v);
        setError('');
      },
      reason => setError(reasonText(reason))
    );
  }, []);
  React.useEffect(reload, [reload]);
  return [value, error, reload];
}

const PENDING_REFRESH_MS = 5000;

/** The last two parts of a notebook's path: enough to recognise it in a narrow panel. */
export function shortPath(path: string): string {
  return path.split('/').filter(Boolean).slice(-2).join('/');
}

/**
 * Every waiting question. One of the focused notebook's own conversation is answered over its
 * kernel's comm (the turn continues in its cell at once); any other through the server.
 */
export function PendingTab(props: { chat: KernelChat | null }): React.ReactElement {
  const [pending, error, reload] = useLoad(fetchPending);
  React.useEffect(() => {
    const timer = setInterval(reload, PENDING_REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);
  const { chat } = props;
  const answer = async (question: PendingQuestion, submission: Submission) => {
    if (chat && chat.notebook && chat.notebook === question.notebook) {
      await chat.answer(question.id, question.session_id, submission);
      return;
    }
    try {
      await answerPending(question, submission);
    } catch (reason) {
      if (reason instanceof ApiError && reason.code === 'not_resumable') {
        throw new Error(
          __(
            '%1 (Open %2 with its kernel running to answer it there.)',
            reason.message,
            question.notebook || __('its notebook')
          )
        );
      }
      throw reason;
    }
  };
  return (
    <div className="jp-DeepTutorPending">
      <div className="jp-DeepTutorPanel-toolbar">
        <button className="jp-Button jp-mod-styled" onClick={reload}>
          {__('Refresh')}
        </button>
      </div>
      {error ? <div className="jp-DeepTutorChat-error">{error}</div> : null}
      {pending && pending.length === 0 ? (
        <div className="jp-DeepTutorPanel-empty">{__('No question is waiting for you.')}</div>
      ) : null}
      {(pending ?? []).map(q => (
        <AskUserCard
          key={q.id}
          request={q}
          where={q.notebook ? __('in %1', shortPath(q.notebook)) : ''}
          continuesIn={shortPath(q.notebook)}
          onSubmit={submission => answer(q, submission)}
        />
      ))}
    </div>
  );
}

// The Memory and Knowledge tabs live in their own modules.
export { MemoryTab } from './memorytab';
export { KnowledgeTab } from './knowledgetab';
