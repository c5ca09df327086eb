/**
 * The streamed answer's blocks (answerblocks.ts): cut only where Markdown allows, finished blocks
 * rendered once, the growing one again with only its latest text. In node, with fake elements.
 */
import { describe, expect, it } from 'vitest';

import { AnswerView, BlockRenderer, answerBlocks, blockStarts } from './answerblocks';

const FENCE = '```python\nx = 1\n\ny = 2\n```\n\n';
const MATH = '$$\na = b\n\nc = d\n$$\n\n';

function longAnswer(): string {
  let text = '';
  for (let i = 0; i < 40; i++) {
    text += `Paragraph ${i} says something useful about eigenvectors.\n\n`;
    text += i % 2 ? FENCE : MATH;
  }
  return text + 'End.';
}

describe('blockStarts', () => {
  it('cuts at a blank line followed by an unindented line', () => {
    expect(blockStarts('a\n\nb\n', 0)).toEqual([3]);
    expect(blockStarts('a\n\n  b\n', 0)).toEqual([]); // indented: the same list item or code
    expect(blockStarts('a\nb\n', 0)).toEqual([]);
  });

  it('never cuts inside a code fence or $$ math', () => {
    expect(blockStarts(FENCE + 'after\n', 0)).toEqual([FENCE.length]);
    expect(blockStarts(MATH + 'after\n', 0)).toEqual([MATH.length]);
    expect(blockStarts('~~~~\na\n\n~~~\nb\n~~~~\n\nc\n', 0)).toEqual([20]);
  });

  it('scans complete lines only: the last line may still grow', () => {
    expect(blockStarts('a\n\nb', 0)).toEqual([]);
  });

  it('groups paragraphs into blocks of at least `least` characters', () => {
    const text = 'word '.repeat(10) + '\n\n' + 'next\n\n'.repeat(20);
    const cuts = blockStarts(text, 40);
    expect(cuts.length).toBeGreaterThan(0);
    let start = 0;
    for (const cut of cuts) {
      expect(cut - start).toBeGreaterThanOrEqual(40);
      start = cut;
    }
  });

  it('joins back to the exact answer, every fence and formula whole, cuts stable as it grows', () => {
    const answer = longAnswer();
    const blocks = answerBlocks(answer, '', 200);
    expect(blocks.join('')).toBe(answer);
    expect(blocks.length).toBeGreaterThan(3);
    for (const block of blocks) {
      expect(block.split('```').length % 2).toBe(1);
      expect(block.split('$$').length % 2).toBe(1);
    }
    const final = blockStarts(answer, 200);
    for (let n = 0; n < answer.length; n += 37) {
      for (const cut of blockStarts(answer.slice(0, n), 200)) {
        expect(final).toContain(cut);
      }
    }
  });

  it('puts the link definitions under the blocks that cite', () => {
    const text = 'x'.repeat(30) + ' [1]\n\n' + 'y'.repeat(30) + '\n';
    expect(answerBlocks(text, '\n\n[1]: a.md', 10)).toEqual([
      'x'.repeat(30) + ' [1]\n\n\n\n[1]: a.md',
      'y'.repeat(30) + '\n'
    ]);
  });
});

interface FakeNode {
  classes: string[];
  removed: boolean;
}

function fakeHost() {
  const children: FakeNode[] = [];
  const host = { appendChild: (node: FakeNode) => children.push(node) };
  return { host: host as unknown as HTMLElement, children };
}

function recorder() {
  const renders: string[][] = [];
  const pending: (() => void)[] = [];
  let hold = false;
  const make = (): BlockRenderer => {
    const mine: string[] = [];
    renders.push(mine);
    const node: FakeNode = { classes: [], removed: false };
    return {
      node: {
        classList: { add: (c: string) => node.classes.push(c) },
        remove: () => (node.removed = true),
        ...node
      } as unknown as HTMLElement,
      render: (markdown: string) => {
        mine.push(markdown);
        return hold ? new Promise<void>(resolve => pending.push(resolve)) : Promise.resolve();
      },
      dispose: () => undefined
    };
  };
  return {
    make,
    renders,
    holdRenders: (on: boolean) => (hold = on),
    release: async () => {
      for (const resolve of pending.splice(0)) {
        resolve();
      }
      await new Promise(resolve => setTimeout(resolve, 0));
    }
  };
}

const flush = () => new Promise(resolve => setTimeout(resolve, 0));

describe('AnswerView', () => {
  it('renders a finished block once and only the growing one again', async () => {
    const { host, children } = fakeHost();
    const r = recorder();
    const view = new AnswerView(host, r.make, 10);
    const first = 'First paragraph, long enough.\n\n';
    const answer = first + 'Second one\ngrows and grows and grows.';
    for (let n = 1; n <= answer.length; n += 3) {
      view.update(answer.slice(0, n), '');
      await flush();
    }
    view.update(answer, '');
    await flush();
    expect(children.length).toBe(2);
    // Once cut (the line after the blank one is complete), the first block is never rendered
    // again; the second one is, with its latest text each time.
    const longer = r.renders[0].map(md => md.length > first.length);
    const cutAt = longer.lastIndexOf(true) + 1;
    expect(cutAt).toBeGreaterThan(0);
    expect(r.renders[0].slice(cutAt)).toEqual([first]);
    expect(r.renders[1].at(-1)).toBe(answer.slice(first.length));
    expect(r.renders[1].length).toBeGreaterThan(3);
  });

  it('while a block renders, renders only the latest text after it', async () => {
    const { host } = fakeHost();
    const r = recorder();
    const view = new AnswerView(host, r.make, 10);
    r.holdRenders(true);
    view.update('a', '');
    view.update('ab', '');
    view.update('abc', '');
    r.holdRenders(false);
    await r.release();
    await flush();
    expect(r.renders[0]).toEqual(['a', 'abc']);
  });

  it('gives every block the dt-text class', () => {
    const { host } = fakeHost();
    const classes: string[] = [];
    const view = new AnswerView(
      host,
      () =>
        ({
          node: { classList: { add: (c: string) => classes.push(c) } } as unknown as HTMLElement,
          render: () => Promise.resolve(),
          dispose: () => undefined
        }) as BlockRenderer,
      10
    );
    view.update('x'.repeat(20) + '\n\nnext\n', '');
    expect(classes).toEqual(['dt-text', 'dt-text']);
  });
});
