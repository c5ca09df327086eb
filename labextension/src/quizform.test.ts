import { describe, expect, it } from 'vitest';

import {
  choose,
  initialAnswers,
  quizProblem,
  quizQuestions,
  quizReceipt,
  submission
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
    // The starter code counts as an answer once sent (it may be graded), but alone it is not one.
    expect(submission(questions, some)).toEqual({ q2: ' 3 m/s ', q4: 'def sq(x):\n    ...' });
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
        { id: 'q2', correct: false, given: '', feedback: 'No answer was given.' }
      ]
    };
    const receipt = quizReceipt(quiz, resolved);
    expect(receipt.score).toBe('Score 50%');
    expect(receipt.lines.map(l => [l.prompt, l.correct, l.given])).toEqual([
      ['Which is 2 squared?', true, 'four'],
      ['Speed?', false, '(no answer)']
    ]);
    const closed = quizReceipt(quiz, { ...resolved, cancelled: true, reason: 'timeout' });
    expect(closed.closed).toBe('This quiz timed out.');
  });
});
