import { describe, expect, it } from 'vitest';

import { ChatTurn, newTurn } from './chatmodel';
import { EventType, TurnEvent } from './protocol';
import { foldEvent, regenerable } from './turnedits';

function ev(turn: string, seq: number, type: EventType, data: object = {}): TurnEvent {
  return { type, seq, turn_id: turn, ...data } as TurnEvent;
}

function turn(id: string, status: ChatTurn['status'], question = id): ChatTurn {
  return { ...newTurn(id, question), status, lastSeq: 3 };
}

describe('regenerate in the chat', () => {
  const shown = [turn('t1', 'done'), turn('t2', 'done', 'Explain rank.')];

  it("puts the new turn where the one it replaces was, with the learner's words", () => {
    const started = ev('t3', 1, 'turn_started', {
      question: 'ctx\n\nExplain rank.',
      replaces: 't2'
    });
    const after = foldEvent(shown, started);
    expect(after.map(t => [t.turnId, t.question, t.status])).toEqual([
      ['t1', 't1', 'done'],
      ['t3', 'Explain rank.', 'running']
    ]);
    // Its content follows in place; a repeated event changes nothing.
    const more = foldEvent(after, ev('t3', 2, 'content', { text: 'Again.' }));
    expect(more[1].answer).toBe('Again.');
    expect(foldEvent(more, ev('t3', 2, 'content', { text: 'Again.' }))).toBe(more);
  });

  it('replaces the old turn even when the turn list named the new one first', () => {
    const listed = [...shown, newTurn('t3', 'Explain rank.')];
    const after = foldEvent(listed, ev('t3', 1, 'turn_started', { replaces: 't2' }));
    expect(after.map(t => t.turnId)).toEqual(['t1', 't3']);
  });

  it('adds a turn that replaces nothing at the end', () => {
    const after = foldEvent(shown, ev('t3', 1, 'turn_started', { question: 'q', replaces: null }));
    expect(after.map(t => [t.turnId, t.question])).toEqual([
      ['t1', 't1'],
      ['t2', 'Explain rank.'],
      ['t3', 'q']
    ]);
  });

  it('offers Regenerate on the last answer only once nothing runs or waits', () => {
    expect(regenerable(shown)).toBe('t2');
    expect(regenerable([turn('t1', 'error')])).toBe('t1');
    expect(regenerable([turn('t1', 'cancelled')])).toBe('t1');
    expect(regenerable([...shown, turn('t3', 'running')])).toBeNull();
    expect(regenerable([turn('t1', 'waiting'), turn('t2', 'done')])).toBeNull();
    expect(regenerable([])).toBeNull();
  });
});
