import { describe, expect, it } from 'vitest';

import type { INotebookTracker } from '@jupyterlab/notebook';

import { LIVE_MAX_CELLS, LIVE_OUTPUT_CHARS, LIVE_SOURCE_CHARS, LIVE_TARGET } from './contracts';
import {
  CellJSON,
  answerRequest,
  liveCell,
  liveCellsReply,
  outputText,
  serveLiveCells
} from './livecells';

const edited: CellJSON = {
  cell_type: 'code',
  source: ['evens = [n for n in range(10)', ' if n % 2 == 0]\n', 'print(evens)'],
  execution_count: 3,
  metadata: { tags: ['exercise', 7] },
  outputs: [
    { output_type: 'stream', name: 'stdout', text: ['[0, 2, 4, 6, 8]\n'] },
    { output_type: 'execute_result', data: { 'text/plain': '5', 'image/png': 'AAAA' } },
    {
      output_type: 'error',
      ename: 'NameError',
      evalue: "name 'odds' is not defined",
      traceback: ['\u001b[31mlong traceback\u001b[0m']
    }
  ]
};

class FakeComm {
  sent: unknown[] = [];
  closed = false;
  send(data: unknown) {
    this.sent.push(data);
  }
  close() {
    this.closed = true;
  }
}

describe('the notebook on screen', () => {
  it('sends a cell as shown: source, count, tags, text outputs', () => {
    expect(liveCell(edited)).toEqual({
      cell_type: 'code',
      source: 'evens = [n for n in range(10) if n % 2 == 0]\nprint(evens)',
      source_length: 57,
      execution_count: 3,
      tags: ['exercise'],
      outputs: "[0, 2, 4, 6, 8]\n5\nNameError: name 'odds' is not defined\n"
    });
    const markdown = liveCell({ cell_type: 'markdown', source: '# Evens', execution_count: 4 });
    expect(markdown.execution_count).toBeNull();
    expect(markdown.outputs).toBe('');
  });

  it('cuts what it sends to the limits the kernel checks', () => {
    const long = liveCell({ cell_type: 'code', source: 'x'.repeat(LIVE_SOURCE_CHARS + 10) });
    expect(long.source.length).toBe(LIVE_SOURCE_CHARS);
    expect(long.source_length).toBe(LIVE_SOURCE_CHARS + 10);
    const noisy = outputText([{ output_type: 'stream', text: 'y'.repeat(LIVE_OUTPUT_CHARS * 3) }]);
    expect(noisy.length).toBe(LIVE_OUTPUT_CHARS);
    expect(noisy.endsWith('\u2026')).toBe(true);
    const many = Array.from({ length: LIVE_MAX_CELLS + 5 }, () => edited);
    const reply = liveCellsReply('r1', many);
    expect(reply.cells.length).toBe(LIVE_MAX_CELLS);
    expect(reply.total_cells).toBe(LIVE_MAX_CELLS + 5);
  });

  it('answers a request by its id and leaves closing to the kernel', () => {
    const comm = new FakeComm();
    answerRequest(comm, { request_id: 'abc' }, () => [edited]);
    expect(comm.sent).toEqual([liveCellsReply('abc', [edited])]);
    expect(comm.closed).toBe(false);
  });

  it('closes a request it cannot answer, so the kernel reads the saved file at once', () => {
    for (const [data, cells] of [
      [{}, [edited]],
      [{ request_id: 5 }, [edited]],
      [{ request_id: 'abc' }, null]
    ] as const) {
      const comm = new FakeComm();
      answerRequest(comm, data, () => cells);
      expect(comm.sent).toEqual([]);
      expect(comm.closed).toBe(true);
    }
  });

  it('serves every notebook on its kernel, panel open or not, after a kernel change', () => {
    type Target = (comm: FakeComm, msg: unknown) => void;
    const kernel = () => {
      const targets = new Map<string, Target>();
      return {
        targets,
        isDisposed: false,
        registerCommTarget: (name: string, cb: Target) => targets.set(name, cb),
        removeCommTarget: (name: string, cb: Target) => {
          if (targets.get(name) === cb) {
            targets.delete(name);
          }
        }
      };
    };
    const first = kernel();
    const second = kernel();
    const slot = <T>() => {
      const handlers: ((sender: unknown, value: T) => void)[] = [];
      return {
        connect: (h: (sender: unknown, value: T) => void) => handlers.push(h),
        emit: (value: T) => handlers.forEach(h => h(null, value))
      };
    };
    const kernelChanged = slot<{ oldValue: unknown; newValue: unknown }>();
    const disposed = slot<void>();
    const context = { session: { kernel: first as unknown }, kernelChanged };
    const cells = [{ toJSON: () => edited }];
    const panel = {
      isDisposed: false,
      content: { model: { cells } },
      sessionContext: context,
      disposed
    };
    const added = slot<unknown>();
    const tracker = { forEach: (f: (p: unknown) => void) => f(panel), widgetAdded: added };
    serveLiveCells(tracker as unknown as INotebookTracker);

    const ask = (k: ReturnType<typeof kernel>) => {
      const comm = new FakeComm();
      k.targets.get(LIVE_TARGET)?.(comm, { content: { data: { request_id: 'r' } } });
      return comm.sent;
    };
    expect(ask(first)).toEqual([liveCellsReply('r', [edited])]);
    context.session.kernel = second;
    kernelChanged.emit({ oldValue: first, newValue: second });
    expect(ask(second)).toEqual([liveCellsReply('r', [edited])]);
    expect(first.targets.has(LIVE_TARGET)).toBe(false); // the old kernel is not served
    context.session = null as unknown as typeof context.session; // gone before the panel
    disposed.emit();
    expect(second.targets.has(LIVE_TARGET)).toBe(false);
  });
});
