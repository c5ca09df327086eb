import { describe, expect, it } from 'vitest';

import { applyEvent, newTurn } from './chatmodel';
import { EventType, TurnEvent } from './protocol';

function ev(seq: number, type: EventType, data: Record<string, unknown> = {}): TurnEvent {
  // Only the fields a case needs: the fold reads no others.
  return { type, seq, turn_id: 'turn-1', ...data } as TurnEvent;
}

const ask = {
  id: 'ask_1',
  tool_call_id: 'call_1',
  session_id: 'nb-1',
  title: 'Which way?',
  mode: 'single',
  options: [{ id: 'safe', label: 'Analyse first' }]
};

describe('folding events into a turn', () => {
  it('keeps the passages a sources event names, for the Sources list', () => {
    const hits = [{ chunk_id: 'a', n: 1, file: 'week1.md' }];
    const turn = applyEvent(newTurn('turn-1', 'q'), ev(2, 'sources', { hits }));
    expect(turn.sources).toEqual(hits);
  });

  it("keeps the learner's words over the composed question the event carries", () => {
    const sent = 'I got this error in my notebook.\n\n```\nZeroDivisionError\n```';
    const shown = applyEvent(
      newTurn('turn-1', 'Explain my last error.'),
      ev(1, 'turn_started', { question: sent })
    );
    expect(shown.question).toBe('Explain my last error.');
    expect(
      applyEvent(newTurn('turn-1', ''), ev(1, 'turn_started', { question: 'Hi?' })).question
    ).toBe('Hi?');
  });

  it('streams content, ignores an event seen already, and ends with done', () => {
    let turn = newTurn('turn-1', '');
    for (const event of [
      ev(1, 'turn_started', { question: 'What is rank?' }),
      ev(3, 'content', { text: 'The rank ' }), // seq 2..3 coalesced by the kernel
      ev(3, 'content', { text: 'The rank ' }), // replayed after a reconnect: ignored
      ev(5, 'content', { text: 'counts pivots.' }),
      ev(6, 'done', { status: 'done', answer: 'The rank counts pivots.' })
    ]) {
      turn = applyEvent(turn, event);
    }
    expect(turn.question).toBe('What is rank?');
    expect(turn.answer).toBe('The rank counts pivots.');
    expect(turn.status).toBe('done');
    expect(turn.lastSeq).toBe(6);
  });

  it('keeps text, tool cards and questions in the order they happened', () => {
    let turn = newTurn('turn-1', 'q');
    turn = applyEvent(turn, ev(1, 'content', { text: 'Let me look. ' }));
    turn = applyEvent(turn, ev(2, 'tool_call', { id: 'c1', name: 'read_notebook' }));
    turn = applyEvent(turn, ev(3, 'tool_call', { id: 'c2', name: 'ask_user' }));
    turn = applyEvent(turn, ev(4, 'user_input_required', ask));
    turn = applyEvent(turn, ev(5, 'content', { text: 'Deep ' }));
    turn = applyEvent(turn, ev(6, 'content', { text: 'it is.' }));
    turn = applyEvent(turn, ev(7, 'done', { status: 'done', answer: 'Deep it is.' }));
    expect(turn.blocks).toEqual([
      { kind: 'text', text: 'Let me look. ' },
      { kind: 'tool', id: 'c1' },
      { kind: 'question', id: 'ask_1' },
      { kind: 'text', text: 'Deep it is.' }
    ]);
    expect(turn.answer).toBe('Let me look. Deep it is.'); // done's last-round answer does not erase it
  });

  it('shows tool cards and their results', () => {
    let turn = newTurn('turn-1', 'q');
    turn = applyEvent(turn, ev(1, 'tool_call', { id: 'c1', name: 'read_notebook' }));
    expect(turn.tools).toEqual([
      { id: 'c1', name: 'read_notebook', summary: '', isError: false, done: false, content: '' }
    ]);
    turn = applyEvent(
      turn,
      ev(2, 'tool_result', { id: 'c1', summary: '3 cells', is_error: false })
    );
    expect(turn.tools[0]).toMatchObject({ summary: '3 cells', done: true });
  });

  it('waits on a question until it is resolved, then keeps the receipt', () => {
    let turn = newTurn('turn-1', 'q');
    turn = applyEvent(turn, ev(1, 'user_input_required', ask));
    expect(turn.status).toBe('waiting');
    expect(turn.questions[0].request.title).toBe('Which way?');
    turn = applyEvent(
      turn,
      ev(2, 'user_input_resolved', { id: 'ask_1', selections: ['safe'], cancelled: false })
    );
    expect(turn.status).toBe('running');
    expect(turn.questions[0].settled).toMatchObject({ selections: ['safe'], cancelled: false });
  });

  it('does not render a question that fails the minimal field check', () => {
    const turn = applyEvent(newTurn('turn-1', 'q'), ev(1, 'user_input_required', { id: 'x' }));
    expect(turn.questions).toEqual([]);
    expect(turn.status).toBe('running');
  });

  it('keeps errors and a stopped status', () => {
    let turn = newTurn('turn-1', 'q');
    turn = applyEvent(turn, ev(1, 'error', { message: 'The API key was rejected.' }));
    turn = applyEvent(turn, ev(2, 'done', { status: 'cancelled', answer: '' }));
    expect(turn.errors).toEqual(['The API key was rejected.']);
    expect(turn.status).toBe('cancelled');
  });
});

describe('context cards and quizzes', () => {
  it('keeps what the model read for attached context, not for other tools', () => {
    let turn = newTurn('turn-1', 'q');
    turn = applyEvent(turn, ev(1, 'tool_call', { id: 'attached-1', name: 'read_cell' }));
    turn = applyEvent(
      turn,
      ev(2, 'tool_result', {
        id: 'attached-1',
        name: 'read_cell',
        content: 'Cell [3] of my notebook: 1 / 0',
        summary: 'cell [3]'
      })
    );
    turn = applyEvent(turn, ev(3, 'tool_call', { id: 'c2', name: 'read_notebook' }));
    turn = applyEvent(
      turn,
      ev(4, 'tool_result', { id: 'c2', name: 'read_notebook', content: 'all cells', summary: '2' })
    );
    expect(turn.tools.map(t => [t.name, t.content, t.summary])).toEqual([
      ['read_cell', 'Cell [3] of my notebook: 1 / 0', 'cell [3]'],
      ['read_notebook', '', '2']
    ]);
  });

  it('shows a quiz as its own card, settled by quiz_resolved', () => {
    const quiz = {
      id: 'quiz_1',
      tool_call_id: 'call_q',
      session_id: 'nb-1',
      expires_at: 0,
      title: 'Squares',
      questions: [{ id: 'q1', kind: 'short', prompt: 'Why?' }]
    };
    let turn = newTurn('turn-1', 'q');
    turn = applyEvent(turn, ev(1, 'tool_call', { id: 'call_q', name: 'make_quiz' }));
    turn = applyEvent(turn, ev(2, 'quiz_required', quiz));
    expect(turn.tools).toEqual([]);
    expect(turn.blocks).toEqual([{ kind: 'quiz', id: 'quiz_1' }]);
    expect(turn.status).toBe('waiting');
    expect(turn.notices).toEqual([]);
    turn = applyEvent(
      turn,
      ev(3, 'quiz_resolved', { id: 'quiz_1', tool_call_id: 'call_q', score: 1 })
    );
    expect(turn.quizzes[0].resolved?.score).toBe(1);
    expect(turn.status).toBe('running');
  });
});
