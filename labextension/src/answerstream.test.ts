/**
 * The kernel's answer module (deeptutor_jupyter/kernel/widgets/answer_stream.js), run against a
 * stand-in model: deltas append at their offset, a gap asks the kernel for the whole text once,
 * and a view shows the model's text through the labextension's hook, or plain without it.
 */
import { afterEach, describe, expect, it } from 'vitest';

interface Model {
  get(key: string): unknown;
  set(key: string, value: unknown): void;
  on(event: string, handler: (...args: unknown[]) => void): void;
  off(event: string, handler: (...args: unknown[]) => void): void;
  send(content: unknown): void;
}

interface AnswerModule {
  initialize(props: { model: Model }): () => void;
  render(props: { model: Model; el: unknown }): () => void;
}

const MODULE = new URL('../../deeptutor_jupyter/kernel/widgets/answer_stream.js', import.meta.url);
const answer = ((await import(/* @vite-ignore */ MODULE.href)) as { default: AnswerModule })
  .default;

function fakeModel(text: string) {
  const state: Record<string, unknown> = { text, suffix: '' };
  const handlers: Record<string, ((...args: unknown[]) => void)[]> = {};
  const sent: unknown[] = [];
  const model: Model = {
    get: key => state[key],
    set: (key, value) => {
      state[key] = value;
      for (const h of handlers[`change:${key}`] ?? []) {
        h();
      }
    },
    on: (event, h) => (handlers[event] ??= []).push(h),
    off: (event, h) => (handlers[event] = (handlers[event] ?? []).filter(x => x !== h)),
    send: content => sent.push(content)
  };
  const delta = (at: number, a: string) => {
    for (const h of handlers['msg:custom'] ?? []) {
      h({ at }, [new DataView(new TextEncoder().encode(a).buffer)]);
    }
  };
  return { model, state, sent, delta };
}

describe('answer_stream.js', () => {
  it('appends each delta at its offset; one already held changes nothing', () => {
    const { model, state, delta } = fakeModel('First ');
    answer.initialize({ model });
    delta(6, 'words, ');
    delta(13, 'then more: é😀.');
    expect(state.text).toBe('First words, then more: é😀.');
    delta(6, 'words, '); // came again (a state reply overtook it): already there
    expect(state.text).toBe('First words, then more: é😀.');
  });

  it('keeps a delta that starts with U+FEFF (a decoder would drop it as a byte order mark)', () => {
    const { model, state, sent, delta } = fakeModel('Zero');
    answer.initialize({ model });
    delta(4, '\uFEFFwidth');
    delta(10, ' space');
    expect(state.text).toBe('Zero\uFEFFwidth space');
    expect(sent).toEqual([]); // the offsets still agree with the kernel's: no resync
  });

  it('on a gap asks the kernel once for the whole text, and takes it at 0', () => {
    const { model, state, sent, delta } = fakeModel('Reloaded ');
    answer.initialize({ model });
    delta(20, 'lost its place');
    delta(34, ' and more');
    expect(sent).toEqual([{ resync: 1 }]);
    expect(state.text).toBe('Reloaded ');
    delta(0, 'Reloaded mid-answer, lost its place and more');
    expect(state.text).toBe('Reloaded mid-answer, lost its place and more');
  });
});

describe('its view', () => {
  afterEach(() => {
    delete (globalThis as { __deeptutorAnswer?: unknown }).__deeptutorAnswer;
  });

  function fakeElement() {
    const classes: string[] = [];
    const children: { className: string; textContent: string; style: object }[] = [];
    return {
      classes,
      children,
      el: {
        classList: { add: (c: string) => classes.push(c) },
        appendChild: (child: (typeof children)[number]) => (children.push(child), child)
      }
    };
  }

  it('goes through the labextension hook with the text and the link definitions', () => {
    const shown: string[][] = [];
    (globalThis as { __deeptutorAnswer?: unknown }).__deeptutorAnswer = () => ({
      update: (text: string, suffix: string) => shown.push([text, suffix]),
      dispose: () => undefined
    });
    const { model } = fakeModel('Hello');
    const { el, classes } = fakeElement();
    const stop = answer.render({ model, el });
    model.set('text', 'Hello [1]');
    model.set('suffix', '\n\n[1]: a.md');
    expect(classes).toEqual(['dt-answer']);
    expect(shown).toEqual([
      ['Hello', ''],
      ['Hello [1]', ''],
      ['Hello [1]', '\n\n[1]: a.md']
    ]);
    stop();
    model.set('text', 'after');
    expect(shown.length).toBe(3);
  });

  it('without the hook shows the text plain, as text', () => {
    const made: { className: string; textContent: string; style: object }[] = [];
    (globalThis as { document?: unknown }).document = {
      createElement: () => {
        const node = { className: '', textContent: '', style: {} };
        made.push(node);
        return node;
      }
    };
    try {
      const { model } = fakeModel('<b>not bold</b>');
      const { el } = fakeElement();
      answer.render({ model, el });
      model.set('text', '<b>not bold</b> and more');
      expect(made[0]).toMatchObject({
        className: 'dt-text',
        textContent: '<b>not bold</b> and more',
        style: { whiteSpace: 'pre-wrap' }
      });
    } finally {
      delete (globalThis as { document?: unknown }).document;
    }
  });
});
