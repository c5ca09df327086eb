/**
 * The answer hook (answerhook.ts) renders the model's words as untrusted Markdown: JupyterLab
 * then sanitizes them (no script, no event handlers), formulas and highlighting kept.
 * JupyterLab's rendermime needs a DOM to import: its MimeModel is stood in for, keeping what
 * the real one does with trust (untrusted unless `trusted: true` is given).
 */
import { describe, expect, it, vi } from 'vitest';

import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';

import { installAnswerHook } from './answerhook';

vi.mock('@jupyterlab/rendermime', () => ({
  MimeModel: class {
    readonly trusted: boolean;
    readonly data: unknown;
    constructor(options: { trusted?: boolean; data?: unknown }) {
      this.trusted = !!options.trusted;
      this.data = options.data;
    }
  }
}));

describe('the answer hook', () => {
  it("renders the model's words as untrusted Markdown, which JupyterLab sanitizes", async () => {
    const given: { trusted: boolean; data: unknown }[] = [];
    const registry = {
      createRenderer: (mime: string) => ({
        mime,
        node: { classList: { add: () => undefined } },
        renderModel: async (model: { trusted: boolean; data: unknown }) => {
          given.push({ trusted: model.trusted, data: model.data });
        },
        dispose: () => undefined
      }),
      latexTypesetter: null
    } as unknown as IRenderMimeRegistry;
    installAnswerHook(registry);
    const hook = (globalThis as { __deeptutorAnswer?: (el: unknown) => unknown })
      .__deeptutorAnswer!;
    const view = hook({ appendChild: (child: unknown) => child }) as {
      update(text: string, suffix: string): void;
      dispose(): void;
    };
    const words = '<img src=x onerror="alert(1)"> and **bold**';
    view.update(words, '');
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(given).toEqual([{ trusted: false, data: { 'text/markdown': words } }]);
    view.dispose();
    delete (globalThis as { __deeptutorAnswer?: unknown }).__deeptutorAnswer;
  });
});
