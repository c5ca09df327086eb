/**
 * The rules of a make_quiz form in the panel (quiz.tsx renders them): the questions of a
 * `quiz_required` event as typed values, the answers as the kernel grades them
 * (learning/quiz.py `check_answers`), and the receipt once graded. The event carries the public
 * view only: correct answers reach the browser in `quiz_resolved`, after grading.
 */
import { __ } from './i18n';
import { QuizRequired, QuizResolved } from './schema';

export interface QuizOption {
  id: string;
  label: string;
}

export type QuizQuestion =
  | { id: string; kind: 'choice'; prompt: string; options: QuizOption[]; multiple: boolean }
  | { id: string; kind: 'numeric'; prompt: string; unit: string }
  | { id: string; kind: 'short'; prompt: string }
  | { id: string; kind: 'code'; prompt: string; starter: string };

/** A choice answer is the ids chosen; every other kind is the text typed. */
export type QuizAnswers = Record<string, string[] | string>;

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The questions a form can show; an unknown kind is skipped (graded as unanswered). */
export function quizQuestions(quiz: QuizRequired): QuizQuestion[] {
  const out: QuizQuestion[] = [];
  for (const raw of quiz.questions) {
    const id = str(raw.id);
    const prompt = str(raw.prompt);
    if (!id) {
      continue;
    }
    switch (raw.kind) {
      case 'choice': {
        const options = (Array.isArray(raw.options) ? raw.options : [])
          .map(o => o as Record<string, unknown>)
          .map(o => ({ id: str(o.id), label: str(o.label) || str(o.id) }))
          .filter(o => o.id);
        out.push({ id, kind: 'choice', prompt, options, multiple: raw.multiple === true });
        break;
      }
      case 'numeric':
        out.push({ id, kind: 'numeric', prompt, unit: str(raw.unit) });
        break;
      case 'short':
        out.push({ id, kind: 'short', prompt });
        break;
      case 'code':
        out.push({ id, kind: 'code', prompt, starter: str(raw.starter) });
        break;
      default:
        break;
    }
  }
  return out;
}

/** The form's first values: nothing chosen, empty text, the starter code. */
export function initialAnswers(questions: readonly QuizQuestion[]): QuizAnswers {
  const out: QuizAnswers = {};
  for (const q of questions) {
    out[q.id] = q.kind === 'choice' ? [] : q.kind === 'code' ? q.starter : '';
  }
  return out;
}

/** A choice clicked: one id for a single choice, toggled in the list for a multiple one. */
export function choose(
  answers: QuizAnswers,
  question: QuizQuestion,
  optionId: string,
  checked: boolean
): QuizAnswers {
  if (question.kind !== 'choice') {
    return answers;
  }
  const current = Array.isArray(answers[question.id]) ? (answers[question.id] as string[]) : [];
  let next: string[];
  if (!question.multiple) {
    next = checked ? [optionId] : [];
  } else if (checked) {
    next = current.includes(optionId) ? current : [...current, optionId];
  } else {
    next = current.filter(id => id !== optionId);
  }
  return { ...answers, [question.id]: next };
}

/** Nothing chosen, nothing typed, or the starter code unchanged (learning/quiz.py `is_blank`). */
export function isBlank(question: QuizQuestion, given: string[] | string | undefined): boolean {
  if (Array.isArray(given)) {
    return given.length === 0;
  }
  const text = (given ?? '').trim();
  return !text || (question.kind === 'code' && text === question.starter.trim());
}

/** How many questions are blank: Submit asks first when there are any. */
export function unansweredCount(questions: readonly QuizQuestion[], answers: QuizAnswers): number {
  return questions.filter(q => isBlank(q, answers[q.id])).length;
}

/** What Submit asks when some questions are blank, or null when none is. */
export function blankQuestion(
  questions: readonly QuizQuestion[],
  answers: QuizAnswers
): string | null {
  const blank = unansweredCount(questions, answers);
  if (!blank) {
    return null;
  }
  return questions.length === 1
    ? __('The question is not answered.')
    : __('%1 of %2 questions are not answered.', blank, questions.length);
}

/** Why the form cannot be sent yet, or null. A skipped question is allowed (graded "not
 * answered", after asking); an answer the grader cannot read (a numeric "abc") is refused by the
 * kernel in words. */
export function quizProblem(
  questions: readonly QuizQuestion[],
  answers: QuizAnswers
): string | null {
  const answered = questions.some(q => !isBlank(q, answers[q.id]));
  return answered ? null : __('Answer at least one question.');
}

/** What the kernel grades: only the questions answered (a skipped one is graded "not answered"). */
export function submission(questions: readonly QuizQuestion[], answers: QuizAnswers): QuizAnswers {
  const out: QuizAnswers = {};
  for (const q of questions) {
    const given = answers[q.id];
    if (given !== undefined && !isBlank(q, given)) {
      out[q.id] = given;
    }
  }
  return out;
}

export interface ReceiptLine {
  id: string;
  prompt: string;
  correct: boolean;
  /** False for a blank: shown as "not answered", neither right nor wrong. */
  answered: boolean;
  given: string;
  feedback: string;
  code: boolean;
}

export interface Receipt {
  closed: string | null;
  score: string;
  lines: ReceiptLine[];
}

/** The graded card's contents, as the cell's receipt shows them (kernel/widgets/quiz_card.py). */
export function quizReceipt(quiz: QuizRequired, resolved: QuizResolved): Receipt {
  if (resolved.cancelled) {
    const closed =
      resolved.reason === 'timeout'
        ? __('This quiz timed out.')
        : resolved.reason === 'turn_stopped'
          ? __('This quiz closed when the answer was stopped.')
          : __('This quiz was closed.');
    return { closed, score: '', lines: [] };
  }
  const questions = new Map(quizQuestions(quiz).map(q => [q.id, q]));
  const lines = (resolved.results ?? []).map(item => {
    const q = questions.get(str(item.id));
    const answered = item.answered !== false;
    return {
      id: str(item.id),
      prompt: q?.prompt ?? str(item.id),
      correct: item.correct === true,
      answered,
      given: answered ? givenText(item.given, q) : __('(not answered)'),
      feedback: str(item.feedback),
      code: q?.kind === 'code' && answered
    };
  });
  const score = __('Score %1%', Math.round((resolved.score ?? 0) * 100));
  return { closed: null, score, lines };
}

function givenText(given: unknown, q: QuizQuestion | undefined): string {
  if (Array.isArray(given)) {
    const labels = new Map(q?.kind === 'choice' ? q.options.map(o => [o.id, o.label]) : []);
    const shown = given.map(g => labels.get(String(g)) ?? String(g)).join(', ');
    return shown || __('(nothing chosen)');
  }
  const value =
    typeof given === 'string' ? given : given === null || given === undefined ? '' : String(given);
  return value.trim() ? value : __('(no answer)');
}
