import { describe, expect, it } from 'vitest';

import {
  blankQuestion,
  choose,
  initialAnswers,
  quizProblem,
  quizQuestions,
  quizReceipt,
  submission,
  unansweredCount
} from './quizform';
import { QuizRequired, QuizResolved } from './schema';

const quiz: QuizRequired = {
  type: 'quiz_required',
  seq: 4,
  turn_id: 'turn-1',
  ts: 0,
  id: 'quiz_1',
  tool_call_id: 'call_q',
  session_id: 'nb-1',
  expires_at: 0,
  title: 'Squares',
  questions: [
    {
      id: 'q1',
      kind: 'choice',
      prompt: 'Which is 2 squared?',
      options: [
        { id: 'a', label: 'two' },
        { id: 'b', label: 'four' }
      ],
      multiple: false
    },
    { id: 'q2', kind: 'numeric', prompt: 'Speed?', unit: 'm/s' },
    { id: 'q3', kind: 'short', prompt: 'Why?' },
    { id: 'q4', kind: 'code', prompt: 'Write sq.', starter: 'def sq(x):\n    ...' },
    { id: 'q5', kind: 'drawing', prompt: 'Unknown kinds are skipped.' }
  ]
};

describe('a quiz form in the panel', () => {
  const questions = quizQuestions(quiz);

  it('reads the public questions, skipping kinds it cannot show', () => {
    expect(questions.map(q => q.kind)).toEqual(['choice', 'numeric', 'short', 'code']);
    expect(initialAnswers(questions)).toEqual({
      q1: [],
      q2: '',
      q3: '',
      q4: 'def sq(x):\n    ...'
    });
  });

  it('keeps one choice for a single-choice question, several for a multiple one', () => {
    let answers = initialAnswers(questions);
    answers = choose(answers, questions[0], 'a', true);
    answers = choose(answers, questions[0], 'b', true);
    expect(answers.q1).toEqual(['b']);
    const multiple = { ...questions[0], multiple: true } as (typeof questions)[0];
    let many = choose(answers, multiple, 'a', true);
    expect(many.q1).toEqual(['b', 'a']);
    many = choose(many, multiple, 'b', false);
    expect(many.q1).toEqual(['a']);
  });

  it('needs one answer; sends only the questions answered', () => {
    const answers = initialAnswers(questions);
    expect(quizProblem(questions, answers)).toBe('Answer at least one question.');
    const some = { ...answers, q2: ' 3 m/s ' };
    expect(quizProblem(questions, some)).toBeNull();
    // The starter code unchanged is a blank, like the kernel's is_blank: not sent.
    expect(submission(questions, some)).toEqual({ q2: ' 3 m/s ' });
    const code = { ...some, q4: 'def sq(x):\n    return x * x' };
    expect(submission(questions, code)).toEqual({ q2: ' 3 m/s ', q4: code.q4 });
  });

  it('counts the blanks Submit asks about first', () => {
    const answers = initialAnswers(questions);
    expect(unansweredCount(questions, answers)).toBe(4);
    const some = { ...answers, q1: ['b'], q4: 'def sq(x):\n    ...\n' };
    expect(unansweredCount(questions, some)).toBe(3); // the starter left as it was is blank
    expect(blankQuestion(questions, some)).toBe('3 of 4 questions are not answered.');
    const full = { ...some, q2: '3', q3: 'because', q4: 'def sq(x):\n    return x * x' };
    expect(unansweredCount(questions, full)).toBe(0);
    expect(blankQuestion(questions, full)).toBeNull();
    expect(blankQuestion(questions.slice(1, 2), { q2: '' })).toBe('The question is not answered.');
  });

  it('shows the graded receipt with the labels chosen', () => {
    const resolved: QuizResolved = {
      type: 'quiz_resolved',
      seq: 9,
      turn_id: 'turn-1',
      ts: 0,
      id: 'quiz_1',
      tool_call_id: 'call_q',
      score: 0.5,
      results: [
        { id: 'q1', correct: true, given: ['b'], feedback: 'Correct.' },
        { id: 'q2', correct: false, given: '', feedback: 'No answer was given.' },
        { id: 'q4', correct: false, given: 'x', feedback: 'Not answered.', answered: false }
      ]
    };
    const receipt = quizReceipt(quiz, resolved);
    expect(receipt.score).toBe('Score 50%');
    expect(receipt.lines.map(l => [l.prompt, l.correct, l.answered, l.given, l.code])).toEqual([
      ['Which is 2 squared?', true, true, 'four', false],
      ['Speed?', false, true, '(no answer)', false],
      ['Write sq.', false, false, '(not answered)', false]
    ]);
    const closed = quizReceipt(quiz, { ...resolved, cancelled: true, reason: 'timeout' });
    expect(closed.closed).toBe('This quiz timed out.');
  });
});
