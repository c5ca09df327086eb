// The cards show their prompts, titles and options through the panel's one Markdown/LaTeX
// renderer when they are given it (`renderText`): rendered here to static markup, in node.
import * as React from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it, vi } from 'vitest';

import { AskUserCard } from './form';
import { InputRequest } from './protocol';
import { QuizCard } from './quiz';
import { QuizRequired } from './schema';

// JupyterLab's editor package needs a browser at import time; static markup never mounts it.
vi.mock('./codeeditor', () => ({ mountCodeEditor: () => null }));

const marked = (text: string): React.ReactNode =>
  React.createElement('b', { className: 'rendered' }, text);

const request = {
  id: 'ask_1',
  tool_call_id: 'call_1',
  session_id: 'nb-1',
  title: 'Which is **singular**?',
  description: 'Think of $A^{-1}$.',
  mode: 'single',
  options: [{ id: 'zero', label: '$\\det A = 0$', description: '`A` has no inverse' }]
} as unknown as InputRequest;

const quiz: QuizRequired = {
  type: 'quiz_required',
  seq: 1,
  turn_id: 'turn-1',
  ts: 0,
  id: 'quiz_1',
  tool_call_id: 'call_q',
  session_id: 'nb-1',
  expires_at: 0,
  title: 'Determinants',
  questions: [
    {
      id: 'q1',
      kind: 'choice',
      prompt: 'Which is $2^2$?',
      options: [{ id: 'a', label: '$\\sqrt{16}$' }],
      multiple: false
    }
  ]
};

const rendered = (text: string) => `<b class="rendered">${text}</b>`;

describe('text through the panel renderer', () => {
  it("renders an ask_user card's title, question, option label and description", () => {
    const html = renderToStaticMarkup(
      React.createElement(AskUserCard, { request, onSubmit: async () => {}, renderText: marked })
    );
    for (const text of ['Which is **singular**?', 'Think of $A^{-1}$.', '$\\det A = 0$']) {
      expect(html).toContain(rendered(text));
    }
    expect(html).toContain(rendered('`A` has no inverse'));
  });

  it("renders a quiz's option labels as its prompts", () => {
    const html = renderToStaticMarkup(
      React.createElement(QuizCard, {
        quiz,
        resolved: null,
        onSubmit: () => Promise.reject(new Error('not here')),
        renderText: marked
      })
    );
    expect(html).toContain(rendered('Which is $2^2$?'));
    expect(html).toContain(rendered('$\\sqrt{16}$'));
  });
});
