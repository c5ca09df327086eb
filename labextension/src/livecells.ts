/**
 * The notebook on screen for the kernel's `read_notebook`: when the kernel opens a comm to
 * `deeptutor.notebook` (deeptutor_jupyter/kernel/live_notebook.py), the notebook that owns the
 * kernel answers with its cells as shown, unsaved edits included. Every notebook answers,
 * whether or not the Tutor panel is open: the learner's work is on screen either way, and the
 * only cost is a comm target on the kernel connection (nothing runs in the kernel).
 *
 * What is sent is cut to the limits the kernel checks (contracts.ts, generated from
 * kernel/comm_messages.py): a reply over them is refused there.
 */
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';

import {
  LIVE_MAX_CELLS,
  LIVE_MAX_TAGS,
  LIVE_OUTPUT_CHARS,
  LIVE_SOURCE_CHARS,
  LIVE_TARGET
} from './contracts';
import { LiveCell, LiveCellsReply } from './schema';

/** A cell as nbformat JSON (`ICellModel.toJSON()`), the fields read here. */
export interface CellJSON {
  cell_type: string;
  source: string | string[];
  execution_count?: number | null;
  outputs?: unknown[];
  metadata?: { tags?: unknown };
}

const ANSI = new RegExp(String.fromCharCode(27) + '\\[[0-9;]*[A-Za-z]', 'g');
const CELL_TYPES = ['code', 'markdown', 'raw'] as const;

function text(value: unknown): string {
  if (Array.isArray(value)) {
    return value.filter(v => typeof v === 'string').join('');
  }
  return typeof value === 'string' ? value : '';
}

/** The text a cell's outputs show: printed text, plain-text results, an error's last line. */
export function outputText(outputs: readonly unknown[]): string {
  const parts: string[] = [];
  for (const output of outputs) {
    const o = (output ?? {}) as Record<string, unknown>;
    if (o.output_type === 'stream') {
      parts.push(text(o.text));
    } else if (o.output_type === 'execute_result' || o.output_type === 'display_data') {
      const data = (o.data ?? {}) as Record<string, unknown>;
      const plain = text(data['text/plain']);
      if (plain) {
        parts.push(plain.endsWith('\n') ? plain : plain + '\n');
      }
    } else if (o.output_type === 'error') {
      parts.push(`${text(o.ename)}: ${text(o.evalue)}\n`);
    }
  }
  const all = parts.join('').replace(ANSI, '');
  const mark = '\n\u2026';
  return all.length > LIVE_OUTPUT_CHARS
    ? all.slice(0, LIVE_OUTPUT_CHARS - mark.length) + mark
    : all;
}

/** One cell as the kernel reads it, cut to the limits. */
export function liveCell(cell: CellJSON): LiveCell {
  const source = text(cell.source);
  const kind = CELL_TYPES.find(t => t === cell.cell_type) ?? 'raw';
  const tags = Array.isArray(cell.metadata?.tags) ? cell.metadata.tags : [];
  const count = cell.execution_count;
  return {
    cell_type: kind,
    source: source.slice(0, LIVE_SOURCE_CHARS),
    source_length: source.length,
    execution_count: kind === 'code' && typeof count === 'number' && count >= 0 ? count : null,
    tags: tags
      .filter((t): t is string => typeof t === 'string')
      .slice(0, LIVE_MAX_TAGS)
      .map(t => t.slice(0, 100)),
    outputs: kind === 'code' ? outputText(cell.outputs ?? []) : ''
  };
}

/** The reply to a request: the first LIVE_MAX_CELLS cells and how many there are. */
export function liveCellsReply(requestId: string, cells: readonly CellJSON[]): LiveCellsReply {
  return {
    request_id: requestId,
    cells: cells.slice(0, LIVE_MAX_CELLS).map(liveCell),
    total_cells: cells.length
  };
}

/** The parts of a comm an answer uses. */
export interface ReplyComm {
  send(data: KM.ICommMsgMsg['content']['data']): unknown;
  close(): unknown;
}

/** Answer one request; `cells` is null when the notebook is gone (the comm is closed then,
 * so the kernel reads the saved file at once). The kernel closes the comm once answered. */
export function answerRequest(
  comm: ReplyComm,
  openData: unknown,
  cells: () => readonly CellJSON[] | null
): void {
  const requestId = (openData as { request_id?: unknown } | null)?.request_id;
  const shown = cells();
  if (typeof requestId !== 'string' || shown === null) {
    comm.close();
    return;
  }
  const reply = liveCellsReply(requestId, shown);
  comm.send(reply as unknown as KM.ICommMsgMsg['content']['data']);
}

function cellsOf(panel: NotebookPanel): CellJSON[] | null {
  const model = panel.isDisposed ? null : panel.content.model;
  if (!model) {
    return null;
  }
  const out: CellJSON[] = [];
  for (const cell of model.cells) {
    out.push(cell.toJSON() as unknown as CellJSON);
  }
  return out;
}

/** Every notebook, open now or later, answers for its kernel (after restarts and changes). */
export function serveLiveCells(notebooks: INotebookTracker): void {
  const watch = (panel: NotebookPanel) => {
    const target = (comm: Kernel.IComm, msg: KM.ICommOpenMsg) =>
      answerRequest(comm, msg.content.data, () => cellsOf(panel));
    const serve = (kernel: Kernel.IKernelConnection | null | undefined, on: boolean) => {
      if (kernel && !kernel.isDisposed) {
        if (on) {
          kernel.registerCommTarget(LIVE_TARGET, target);
        } else {
          kernel.removeCommTarget(LIVE_TARGET, target);
        }
      }
    };
    const context = panel.sessionContext;
    // Remembered: the notebook's session is gone by the time the panel is disposed.
    let served = context.session?.kernel;
    serve(served, true);
    context.kernelChanged.connect((_, change) => {
      serve(served, false);
      served = change.newValue;
      serve(served, true);
    });
    panel.disposed.connect(() => serve(served, false));
  };
  notebooks.forEach(watch);
  notebooks.widgetAdded.connect((_, panel) => watch(panel));
}
