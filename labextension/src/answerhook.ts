/**
 * Where this extension is installed, the kernel's streamed answer (answer_stream.js) renders
 * as Markdown through JupyterLab's own `text/markdown` renderer, so LaTeX and highlighted code
 * look as they do in any Markdown output; without it, that module shows the text plain.
 */
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';

import { AnswerHook, AnswerView, BlockRenderer } from './answerblocks';

const MARKDOWN = 'text/markdown';

type HookHost = { __deeptutorAnswer?: (el: HTMLElement) => AnswerHook };

function markdownBlock(rendermime: IRenderMimeRegistry): BlockRenderer {
  const renderer = rendermime.createRenderer(MARKDOWN);
  return {
    node: renderer.node,
    // Untrusted: the model's words are sanitized, never run (formulas and highlighting stay).
    // The renderer typesets only once attached as a Lumino widget; this node is placed by hand
    // (as the panel's Markdown is, panel.tsx), so its LaTeX is typeset here.
    render: async markdown => {
      await renderer.renderModel(new MimeModel({ data: { [MARKDOWN]: markdown } }));
      await rendermime.latexTypesetter?.typeset(renderer.node);
    },
    dispose: () => renderer.dispose()
  };
}

/** Register `globalThis.__deeptutorAnswer`, which answer_stream.js looks for in each view. */
export function installAnswerHook(rendermime: IRenderMimeRegistry): void {
  (globalThis as HookHost).__deeptutorAnswer = el =>
    new AnswerView(el, () => markdownBlock(rendermime));
}
