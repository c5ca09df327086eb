/**
 * The kernel's status line module (deeptutor_jupyter/kernel/widgets/status_line.js): the kernel
 * sends the line when its words change, and this module advances its clock each second until
 * the line it gets has no live clock (the turn has ended). It draws the turn's Stop button too.
 * Stand-in model and elements.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

interface Model {
  get(key: string): unknown;
  send?(content: unknown): void;
  on(event: string, handler: () => void): void;
  off(event: string, handler: () => void): void;
}

const MODULE = new URL('../../deeptutor_jupyter/kernel/widgets/status_line.js', import.meta.url);
const statusLine = (
  (await import(/* @vite-ignore */ MODULE.href)) as {
    default: { render(props: { model: Model; el: unknown }): () => void };
  }
).default;

/** The Stop button the line draws: its label, whether it shows, and its click. */
function fakeButton() {
  const attributes: Record<string, string> = {};
  return {
    className: '',
    type: 'submit',
    textContent: '',
    attributes,
    setAttribute: (name: string, value: string) => (attributes[name] = value),
    style: { display: '' },
    onclick: null as null | (() => void)
  };
}

/** Just enough of a document: a button, or the line's element. */
function fakeDocument(line: { node: unknown }, button = fakeButton()) {
  return { createElement: (tag: string) => (tag === 'button' ? button : line.node) };
}

/** Just enough of an element: innerHTML parsed for the one clock span the module looks for. */
function fakeLine() {
  const clock = { textContent: '' };
  let live = false;
  let html = '';
  return {
    clock,
    node: {
      className: '',
      get innerHTML() {
        return html;
      },
      set innerHTML(value: string) {
        html = value;
        const match = value.match(/<span class="dt-clock"( data-live)?>([^<]*)<\/span>/);
        live = !!match?.[1];
        clock.textContent = match?.[2] ?? '';
      },
      querySelector: () => (live ? clock : null)
    }
  };
}

describe('status_line.js', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => {
    vi.useRealTimers();
    delete (globalThis as { document?: unknown }).document;
  });

  it('advances a live clock each second, draws Stop while the turn runs, and stops at the final line', () => {
    const line = fakeLine();
    const button = fakeButton();
    (globalThis as { document?: unknown }).document = fakeDocument(line, button);
    const state: Record<string, string> = {
      value: '<b>m</b> · <span class="dt-clock" data-live>2.5 s</span> · answering…',
      stop: 'Stop'
    };
    const handlers: (() => void)[] = [];
    const sent: unknown[] = [];
    const model: Model = {
      get: key => state[key],
      send: content => sent.push(content),
      on: (_event, h) => handlers.push(h),
      off: () => undefined
    };
    const classes: string[] = [];
    const el = {
      classList: { add: (...c: string[]) => classes.push(...c) },
      appendChild: (node: unknown) => node
    };
    const stop = statusLine.render({ model, el });
    expect(classes).toContain('widget-html');
    expect(line.clock.textContent).toBe('2.5 s');
    vi.advanceTimersByTime(3000);
    expect(line.clock.textContent).toBe('5.5 s');
    // Stop shows while the turn runs; its click is ipywidgets' Button's message.
    expect(button.textContent).toContain('Stop');
    expect(button.style.display).toBe('');
    // A real button (the keyboard reaches it), named by its label alone for a screen reader.
    expect(button.type).toBe('button');
    expect(button.attributes['aria-label']).toBe('Stop');
    button.onclick?.();
    expect(sent).toEqual([{ event: 'click' }]);
    state.value = '<b>m</b> · <span class="dt-clock">7.0 s</span> · done';
    state.stop = '';
    handlers.forEach(h => h());
    vi.advanceTimersByTime(3000);
    expect(line.clock.textContent).toBe('7.0 s');
    expect(line.node.innerHTML).toContain('done');
    expect(button.style.display).toBe('none'); // the turn has ended: nothing to stop
    stop();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops the clock and hides Stop when the kernel is gone (a restart or a lost connection)', () => {
    const line = fakeLine();
    const button = fakeButton();
    (globalThis as { document?: unknown }).document = fakeDocument(line, button);
    const value = '<b>m</b> · <span class="dt-clock" data-live>2.5 s</span> · answering…';
    const handlers: Record<string, (() => void)[]> = {};
    const model: Model = {
      get: key => (key === 'stop' ? 'Stop' : value),
      on: (event, h) => (handlers[event] ??= []).push(h),
      off: (event, h) => (handlers[event] = (handlers[event] ?? []).filter(x => x !== h))
    };
    const el = { classList: { add: () => undefined }, appendChild: (node: unknown) => node };
    const stop = statusLine.render({ model, el });
    vi.advanceTimersByTime(2000);
    expect(line.clock.textContent).toBe('4.5 s');
    // ipywidgets marks every model of a restarted or disconnected kernel not live.
    (handlers['comm_live_update'] ?? []).forEach(h => h());
    vi.advanceTimersByTime(60000);
    expect(line.clock.textContent).toBe('4.5 s');
    expect(button.style.display).toBe('none'); // a dead kernel's turn cannot be stopped
    stop();
    expect(Object.values(handlers).flat()).toEqual([]);
  });
});
