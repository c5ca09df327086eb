/**
 * The kernel's status line module (deeptutor_jupyter/kernel/widgets/status_line.js): the kernel
 * sends the line when its words change, and this module advances its clock each second until
 * the line it gets has no live clock (the turn has ended). Stand-in model and elements.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

interface Model {
  get(key: string): unknown;
  on(event: string, handler: () => void): void;
  off(event: string, handler: () => void): void;
}

const MODULE = new URL('../../deeptutor_jupyter/kernel/widgets/status_line.js', import.meta.url);
const statusLine = (
  (await import(/* @vite-ignore */ MODULE.href)) as {
    default: { render(props: { model: Model; el: unknown }): () => void };
  }
).default;

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

  it('advances a live clock each second and stops at the final line', () => {
    const line = fakeLine();
    (globalThis as { document?: unknown }).document = { createElement: () => line.node };
    const state: Record<string, string> = {
      value: '<b>m</b> · <span class="dt-clock" data-live>2.5 s</span> · answering…'
    };
    const handlers: (() => void)[] = [];
    const model: Model = {
      get: key => state[key],
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
    state.value = '<b>m</b> · <span class="dt-clock">7.0 s</span> · done';
    handlers.forEach(h => h());
    vi.advanceTimersByTime(3000);
    expect(line.clock.textContent).toBe('7.0 s');
    expect(line.node.innerHTML).toContain('done');
    stop();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops the clock when the kernel is gone (a restart or a lost connection)', () => {
    const line = fakeLine();
    (globalThis as { document?: unknown }).document = { createElement: () => line.node };
    const value = '<b>m</b> · <span class="dt-clock" data-live>2.5 s</span> · answering…';
    const handlers: Record<string, (() => void)[]> = {};
    const model: Model = {
      get: () => value,
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
    stop();
    expect(Object.values(handlers).flat()).toEqual([]);
  });
});
