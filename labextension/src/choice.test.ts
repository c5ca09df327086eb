import { describe, expect, it } from 'vitest';

import { applyEvent, newTurn } from './chatmodel';
import { chooseAction, chooserFrom, hasChoices, turnChoiceLabel } from './choice';
import { ChoicesMessage, TurnEvent } from './schema';

const offered: ChoicesMessage = {
  type: 'choices',
  session_id: 'nb-1',
  choice: { model: null, kbs: [] },
  models: ['fake-model', 'fake-big'],
  default_model: 'fake-model',
  kbs: ['linalg']
};

describe('the model and knowledge-base chooser', () => {
  it('starts from the configured model and no knowledge base', () => {
    const chooser = chooserFrom(offered);
    expect([chooser.model, chooser.kb, chooser.sessionId]).toEqual(['', '', 'nb-1']);
    expect(hasChoices(chooser)).toBe(true);
  });

  it('sends the chosen model and knowledge base for this conversation', () => {
    const chooser = chooserFrom(offered);
    expect(chooseAction(chooser, 'fake-big', 'linalg')).toEqual({
      action: 'choose',
      conversation: 'nb-1',
      model: 'fake-big',
      kbs: ['linalg']
    });
  });

  it('sends the configured model as no choice, so a change of the settings applies later', () => {
    const chooser = chooserFrom({ ...offered, choice: { model: 'fake-big', kbs: ['linalg'] } });
    expect(chooseAction(chooser, 'fake-model', '')).toMatchObject({ model: null, kbs: [] });
  });

  it('still shows a chosen model or knowledge base that is no longer offered', () => {
    const chooser = chooserFrom({
      ...offered,
      choice: { model: 'gone-model', kbs: ['deleted'] },
      kbs: []
    });
    expect(chooser.models).toEqual(['fake-model', 'fake-big', 'gone-model']);
    expect(chooser.kbs).toEqual(['deleted']);
  });

  it('is hidden when there is nothing to choose', () => {
    expect(hasChoices(null)).toBe(false);
    expect(hasChoices(chooserFrom({ ...offered, models: ['fake-model'], kbs: [] }))).toBe(false);
  });
});

describe("a turn's trace line", () => {
  it('names the model and knowledge bases its turn_started reported', () => {
    const event = {
      type: 'turn_started',
      seq: 1,
      turn_id: 'turn-1',
      ts: 0,
      session_id: 'nb-1',
      question: 'q',
      model: 'openrouter/openai/gpt-4o-mini',
      kbs: ['linalg']
    } as TurnEvent;
    const turn = applyEvent(newTurn('turn-1', 'q'), event);
    expect(turnChoiceLabel(turn.model, turn.kbs, 'KB')).toBe('openai/gpt-4o-mini \u00b7 KB linalg');
    expect(turnChoiceLabel('custom/fake', [], 'KB')).toBe('fake');
  });
});
