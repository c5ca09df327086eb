import { describe, expect, it } from 'vitest';

import {
  answerProblem,
  buildSubmission,
  cardKind,
  controlOf,
  receiptOf,
  showsCustomField,
  submitLabelOf,
  submitsOnEnter,
  toInputRequest,
  toggleSelection
} from './askuser';
import { ASK_MODES, AskMode, InputRequest } from './protocol';

const options = [
  { id: 'safe', label: 'Analyse first', recommended: true },
  { id: 'fast', label: 'Just do it' }
];

function request(mode: AskMode, extra: Record<string, unknown> = {}): InputRequest {
  const needsOptions = mode === 'single' || mode === 'multiple' || mode === 'toggle';
  const req = toInputRequest({
    id: 'ask_1',
    tool_call_id: 'call_1',
    title: 'Which way?',
    mode,
    options: needsOptions ? options : [],
    ...extra
  });
  if (!req) {
    throw new Error(`not a request: ${mode}`);
  }
  return req;
}

describe('minimal field check', () => {
  it('accepts the reference example', () => {
    const req = request('single');
    expect(req.options?.[0]).toEqual({
      id: 'safe',
      label: 'Analyse first',
      description: '',
      recommended: true
    });
    expect(req.resumable).toBe(true);
  });

  it.each(['id', 'tool_call_id', 'title', 'mode'])('refuses a request without %s', field => {
    const data: Record<string, unknown> = {
      id: 'ask_1',
      tool_call_id: 'call_1',
      title: 'Which way?',
      mode: 'text'
    };
    delete data[field];
    expect(toInputRequest(data)).toBeNull();
    expect(toInputRequest({ ...data, [field]: 7 })).toBeNull();
  });

  it('refuses an unknown mode and a choice mode without usable options', () => {
    const base = { id: 'a', tool_call_id: 'c', title: 't' };
    expect(toInputRequest({ ...base, mode: 'slider' })).toBeNull();
    expect(toInputRequest({ ...base, mode: 'single', options: [] })).toBeNull();
    expect(toInputRequest({ ...base, mode: 'toggle', options: [{ id: 'x' }] })).toBeNull();
    expect(toInputRequest(null)).toBeNull();
    expect(toInputRequest('user_input_required')).toBeNull();
  });

  it('drops malformed options but keeps the good ones', () => {
    const req = toInputRequest({
      id: 'a',
      tool_call_id: 'c',
      title: 't',
      mode: 'multiple',
      options: [{ id: 'ok', label: 'OK' }, { label: 'no id' }, 'x']
    });
    expect(req?.options?.map(o => o.id)).toEqual(['ok']);
  });
});

describe('one control per mode', () => {
  it('maps all seven modes', () => {
    expect(ASK_MODES.map(controlOf)).toEqual([
      'radio',
      'checkbox',
      'text',
      'number',
      'date',
      'directory',
      'toggle'
    ]);
  });

  it('single keeps only one selection, multiple and toggle keep several', () => {
    expect(toggleSelection(request('single'), ['safe'], 'fast', true)).toEqual(['fast']);
    expect(toggleSelection(request('single'), ['safe'], 'safe', false)).toEqual([]);
    expect(toggleSelection(request('multiple'), ['safe'], 'fast', true)).toEqual(['safe', 'fast']);
    expect(toggleSelection(request('toggle'), ['safe', 'fast'], 'safe', false)).toEqual(['fast']);
  });
});

describe('allow_custom and submit_label', () => {
  it('adds the other field to choice modes only', () => {
    for (const mode of ['single', 'multiple', 'toggle'] as AskMode[]) {
      expect(showsCustomField(request(mode, { allow_custom: true }))).toBe(true);
      expect(showsCustomField(request(mode))).toBe(false);
    }
    for (const mode of ['text', 'number', 'date', 'directory'] as AskMode[]) {
      expect(showsCustomField(request(mode, { allow_custom: true }))).toBe(false);
    }
  });

  it('uses submit_label when given', () => {
    expect(submitLabelOf(request('text', { submit_label: 'Continue' }), 'Submit')).toBe('Continue');
    expect(submitLabelOf(request('text', { submit_label: '  ' }), 'Submit')).toBe('Submit');
    expect(submitLabelOf(request('text'), 'Submit')).toBe('Submit');
  });
});

describe('answers', () => {
  it('single and toggle need a choice; multiple may be empty', () => {
    expect(answerProblem(request('single'), [], '')).toBe('Choose at least one option.');
    expect(answerProblem(request('toggle'), [], '')).toBe('Choose at least one option.');
    expect(answerProblem(request('single'), ['safe', 'fast'], '')).toBe('Choose one option.');
    expect(answerProblem(request('multiple'), [], '')).toBeNull();
    expect(answerProblem(request('single'), ['nope'], '')).toBe('Not an option of this question.');
  });

  it('free text on a choice needs allow_custom', () => {
    expect(answerProblem(request('single'), [], 'mine')).toMatch(/free-text/);
    expect(answerProblem(request('single', { allow_custom: true }), [], 'mine')).toBeNull();
  });

  it('checks text, number, date and directory like the kernel', () => {
    expect(answerProblem(request('text'), [], '   ')).toBe('Please type an answer.');
    expect(answerProblem(request('number'), [], '3.5')).toBeNull();
    expect(answerProblem(request('number'), [], 'three')).toMatch(/not a number/);
    expect(answerProblem(request('number'), [], 'Infinity')).toMatch(/not a number/);
    expect(answerProblem(request('date'), [], '2026-02-28')).toBeNull();
    expect(answerProblem(request('date'), [], '2026-02-30')).toMatch(/ISO/);
    expect(answerProblem(request('date'), [], '20260102')).toMatch(/ISO/);
    expect(answerProblem(request('directory'), [], 'data/raw')).toBeNull();
    expect(answerProblem(request('directory'), [], '../elsewhere')).toMatch(/inside/);
    expect(answerProblem(request('directory'), [], '/etc')).toMatch(/inside/);
    expect(answerProblem(request('text'), ['safe'], 'x')).toMatch(/option/);
  });

  it('builds the submission the kernel expects, or says why not', () => {
    expect(buildSubmission(request('text'), [], '  hello ')).toEqual({
      selections: [],
      custom_input: 'hello',
      cancelled: false
    });
    expect(buildSubmission(request('multiple'), ['fast'], '')).toEqual({
      selections: ['fast'],
      custom_input: '',
      cancelled: false
    });
    expect(() => buildSubmission(request('single'), [], '')).toThrow('Choose at least one option.');
  });
});

describe('resumable and receipts', () => {
  it('shows only the notice when the question cannot resume', () => {
    expect(cardKind(request('single', { resumable: false }))).toBe('not_resumable');
    expect(cardKind(request('single'))).toBe('form');
  });

  it('writes answered, cancelled and expired receipts', () => {
    const req = request('multiple', { allow_custom: true });
    expect(receiptOf(req, { selections: ['safe'], custom_input: 'and tests' })).toBe(
      'Answered: Analyse first, and tests'
    );
    expect(receiptOf(req, { cancelled: true })).toMatch(/^Cancelled/);
    expect(receiptOf(req, { cancelled: true, reason: 'timeout' })).toMatch(/^Expired/);
  });
});

describe('submitsOnEnter', () => {
  const enter = { key: 'Enter', shiftKey: false, ctrlKey: false, metaKey: false };
  it('submits a complete one-line answer on Enter', () => {
    expect(submitsOnEnter(enter, null, false)).toBe(true);
  });
  it('not while incomplete, sending, composing, or with a modifier', () => {
    expect(submitsOnEnter(enter, 'Type an answer.', false)).toBe(false);
    expect(submitsOnEnter(enter, null, true)).toBe(false);
    expect(submitsOnEnter({ ...enter, isComposing: true }, null, false)).toBe(false);
    expect(submitsOnEnter({ ...enter, shiftKey: true }, null, false)).toBe(false);
    expect(submitsOnEnter({ ...enter, key: 'a' }, null, false)).toBe(false);
  });
});
