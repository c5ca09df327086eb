/**
 * A turn's streamed answer, rendered as Markdown in blocks (issue 28).
 *
 * The kernel sends the answer append-only (kernel/widgets/answer_stream.py and .js); its text
 * grows on the model and each change hands the whole text here. Re-rendering all of it at every
 * change would typeset every formula again each second, so the text is cut into blocks at safe
 * Markdown boundaries (a blank line outside code fences and `$$` math, followed by an unindented
 * line, once the block holds `MIN_BLOCK` characters): a finished block is rendered once, only
 * the last one again as it grows. Cuts depend only on the text before them, so a block once
 * finished never changes (except for the `[n]` link definitions added at the turn's end).
 *
 * Pure logic: the rendering itself is given (answerhook.ts uses JupyterLab's Markdown renderer).
 */

/** Characters a block holds before it may end: few renderers, and a short re-rendered tail. */
export const MIN_BLOCK = 2000;

/** Offsets where a new block starts, found in the complete lines of `text`. */
export function blockStarts(text: string, least: number = MIN_BLOCK): number[] {
  const cuts: number[] = [];
  let fence = ''; // the open code fence's marker, if any
  let math = false; // inside $$ ... $$
  let blank = false; // the last line was blank, outside fences and math (no cut inside them)
  let start = 0;
  let scan = 0;
  for (let end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n', scan)) {
    const line = text.slice(scan, end);
    const stripped = line.trim();
    if (blank && stripped && !/^\s/.test(line) && scan - start >= least) {
      cuts.push(scan);
      start = scan;
    }
    if (fence) {
      if (stripped.startsWith(fence) && !stripped.split(fence[0]).join('')) {
        fence = '';
      }
    } else if ((stripped.startsWith('```') || stripped.startsWith('~~~')) && !math) {
      fence = stripped.match(/^(`+|~+)/)![0];
    } else if (stripped.split('$$').length % 2 === 0) {
      math = !math; // an odd number of $$ on the line
    }
    blank = !stripped && !fence && !math;
    scan = end + 1;
  }
  return cuts;
}

/** The blocks' Markdown; those that cite `[n]` get the link definitions (`suffix`) under them. */
export function answerBlocks(text: string, suffix = '', least = MIN_BLOCK): string[] {
  const bounds = [0, ...blockStarts(text, least), text.length];
  const blocks: string[] = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const block = text.slice(bounds[i], bounds[i + 1]);
    if (block) {
      blocks.push(suffix && /\[\d+\]/.test(block) ? block + suffix : block);
    }
  }
  return blocks;
}

/** One block's rendering: its element, and a render of Markdown into it. */
export interface BlockRenderer {
  readonly node: HTMLElement;
  render(markdown: string): Promise<void>;
  dispose(): void;
}

/** What the answer's module (answer_stream.js) calls `globalThis.__deeptutorAnswer(el)` for. */
export interface AnswerHook {
  update(text: string, suffix: string): void;
  dispose(): void;
}

class Block {
  private shown = '';
  private wanted = '';
  private busy = false;

  constructor(readonly renderer: BlockRenderer) {}

  /** Render `markdown`; while a rendering runs, only the latest text is rendered after it. */
  show(markdown: string): void {
    this.wanted = markdown;
    if (!this.busy && this.shown !== markdown) {
      void this.run();
    }
  }

  private async run(): Promise<void> {
    this.busy = true;
    try {
      while (this.shown !== this.wanted) {
        const markdown = this.wanted;
        try {
          await this.renderer.render(markdown);
        } catch (reason) {
          console.warn('DeepTutor: an answer block did not render.', reason);
        }
        this.shown = markdown;
      }
    } finally {
      this.busy = false;
    }
  }
}

/** The answer's blocks in `host`, each element with the class `dt-text`. */
export class AnswerView implements AnswerHook {
  private blocks: Block[] = [];

  constructor(
    private host: HTMLElement,
    private make: () => BlockRenderer,
    private least = MIN_BLOCK
  ) {}

  update(text: string, suffix: string): void {
    const markdown = answerBlocks(text, suffix, this.least);
    for (const gone of this.blocks.splice(markdown.length)) {
      gone.renderer.node.remove();
      gone.renderer.dispose();
    }
    markdown.forEach((md, i) => {
      if (!this.blocks[i]) {
        const renderer = this.make();
        renderer.node.classList.add('dt-text');
        this.host.appendChild(renderer.node);
        this.blocks.push(new Block(renderer));
      }
      this.blocks[i].show(md);
    });
  }

  dispose(): void {
    for (const block of this.blocks.splice(0)) {
      block.renderer.dispose();
    }
  }
}
