/**
 * The panel's tabs that read through the server extension: Pending, Memory and Knowledge.
 */
import * as React from 'react';

import { ApiError, answerPending, fetchPending } from './api';
import { KernelChat } from './chat';
import { AskUserCard } from './form';
import { __ } from './i18n';
import { PendingQuestion, PendingQuiz, Submission } from './protocol';
import { QuizCard } from './quiz';
import { QuizAnswers } from './quizform';
import { reasonText } from './errors';
import { RefreshBar } from './refreshbar';

/** A read through the server: its value, the error in words, and a reload. */
export function useLoad<T>(load: () => Promise<T>): [T | null, string, () => void] {
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
 * Every waiting question and quiz. A question of the focused notebook's own conversation is
 * answered over its kernel's comm (the turn continues in its cell at once); any other through
 * the server. A quiz is graded by a kernel from the stored quiz: the focused notebook's kernel
 * takes it, whichever notebook asked it, and its turn goes on in that notebook's cell.
 */
export function PendingTab(props: {
  chat: KernelChat | null;
  /** Markdown and LaTeX in questions, options and quiz prompts (the panel's renderer). */
  renderText?: (text: string) => React.ReactNode;
}): React.ReactElement {
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
  const answerQuiz = (quiz: PendingQuiz, answers: QuizAnswers, seconds: number) => {
    if (!chat) {
      return Promise.reject(
        new Error(__('Open a notebook with its kernel running to answer this quiz.'))
      );
    }
    return chat.answerQuiz(quiz.id, quiz.session_id, answers, seconds);
  };
  const questions = pending?.questions ?? [];
  const quizzes = pending?.quizzes ?? [];
  return (
    <div className="jp-DeepTutorPending">
      <RefreshBar onRefresh={reload} error={error} />
      {pending && questions.length === 0 && quizzes.length === 0 ? (
        <div className="jp-DeepTutorPanel-empty">{__('No question is waiting for you.')}</div>
      ) : null}
      {quizzes.map(q => (
        <QuizCard
          key={q.id}
          quiz={{ ...q, type: 'quiz_required', seq: 0, ts: q.created_at }}
          resolved={null}
          continuesIn={shortPath(q.notebook)}
          renderText={props.renderText}
          onSubmit={(answers, seconds) => answerQuiz(q, answers, seconds)}
        />
      ))}
      {questions.map(q => (
        <AskUserCard
          key={q.id}
          request={q}
          where={q.notebook ? __('in %1', shortPath(q.notebook)) : ''}
          continuesIn={shortPath(q.notebook)}
          renderText={props.renderText}
          onSubmit={submission => answer(q, submission)}
        />
      ))}
    </div>
  );
}

// The Memory and Knowledge tabs live in their own modules.
export { MemoryTab } from './memorytab';
export { KnowledgeTab } from './knowledgetab';
