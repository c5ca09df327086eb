/**
 * The lab end of cell insertion (the kernel end is deeptutor_jupyter/kernel/cells_comm.py).
 *
 * The kernel announces an insertion on the comm target `deeptutor.cells`; the JupyterLab that
 * has that notebook open claims it on `deeptutor.cells.reply`, gets the cells, and inserts them
 * into the notebook's shared model, as if typed: undo works, the learner's unsaved edits in
 * other cells stay, nothing is written to the file (the learner saves as usual). An edit of a
 * learner's cell (confirmed by them in the kernel first) goes the same way.
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

export const ANNOUNCE = 'deeptutor.cells';
export const REPLY = 'deeptutor.cells.reply';

export interface NewCell {
  cell_type: 'markdown' | 'code';
  source: string;
  metadata: Record<string, unknown>;
}

export interface InsertMessage {
  op: 'insert';
  cells: NewCell[];
  after: string | null;
  index: number | null;
}

/** The learner confirmed this change of their cell in the kernel (cells.edit_cell). */
export interface EditMessage {
  op: 'edit';
  cell_id: string;
  source: string;
}

/** Where new cells go: after the cell `after`, at `index`, or at the end; null if impossible. */
export function insertionIndex(
  ids: readonly string[],
  after: string | null,
  index: number | null
): number | null {
  if (after !== null) {
    const found = ids.indexOf(after);
    return found < 0 ? null : found + 1;
  }
  if (index === null) {
    return ids.length;
  }
  return index >= 0 && index <= ids.length ? index : null;
}

/** Whether the notebook the kernel names (its JPY_SESSION_NAME) is the one at `path`. */
export function sameNotebook(announced: string, path: string): boolean {
  return announced === path || announced.endsWith('/' + path);
}

/** Insert into a panel's model; the new cells' ids, or an error in words. */
export function insertInto(panel: NotebookPanel, message: InsertMessage): string[] | string {
  const model = panel.content.model;
  if (!model) {
    return 'the notebook is not loaded';
  }
  const shared = model.sharedModel;
  const at = insertionIndex(
    shared.cells.map(cell => cell.id),
    message.after,
    message.index
  );
  if (at === null) {
    return `no cell ${message.after ?? ''} at index ${message.index ?? ''}`;
  }
  // JSON from the kernel, in nbformat's shape (deeptutor_jupyter/cells: to_json).
  const cells = message.cells as unknown as Parameters<typeof shared.insertCells>[1];
  // The insertion is one undo step of its own: undo removes the tutor's cells, never with
  // what the learner typed just before or after.
  const undo = (shared as { undoManager?: { stopCapturing(): void } }).undoManager;
  undo?.stopCapturing();
  const ids = shared.insertCells(at, cells).map(cell => cell.id);
  undo?.stopCapturing();
  return ids;
}

/** Set a cell's source in a panel's model, as one undo step; its id, or an error in words. */
export function editIn(panel: NotebookPanel, message: EditMessage): string[] | string {
  const shared = panel.content.model?.sharedModel;
  const cell = shared?.cells.find(candidate => candidate.id === message.cell_id);
  if (!shared || !cell) {
    return `no cell ${message.cell_id}`;
  }
  const undo = (shared as { undoManager?: { stopCapturing(): void } }).undoManager;
  undo?.stopCapturing();
  cell.setSource(message.source);
  undo?.stopCapturing();
  return [cell.id];
}

/** Listen for the kernel's announcements on every notebook's kernel. */
export function watchCells(notebooks: INotebookTracker): void {
  const client = Math.random().toString(36).slice(2);
  const bind = (panel: NotebookPanel): void => {
    const register = (): void => {
      const kernel = panel.sessionContext.session?.kernel;
      if (kernel) {
        // One handler per connection (registering again replaces it): it finds the panel.
        kernel.registerCommTarget(ANNOUNCE, (_comm, msg) =>
          announced(notebooks, kernel, client, msg)
        );
      }
    };
    panel.sessionContext.kernelChanged.connect(register);
    void panel.sessionContext.ready.then(register);
  };
  notebooks.forEach(bind);
  notebooks.widgetAdded.connect((_, panel) => bind(panel));
}

function announced(
  notebooks: INotebookTracker,
  kernel: Kernel.IKernelConnection,
  client: string,
  msg: KernelMessage.ICommOpenMsg
): void {
  const data = msg.content.data as { request?: string; notebook?: string };
  const notebook = data.notebook ?? '';
  const panel = notebooks.find(
    // Whatever kernel the panel has: the kernel may ask about another notebook (a book).
    candidate => sameNotebook(notebook, candidate.context.path)
  );
  if (!panel) {
    return; // another notebook of this kernel's, or not open here
  }
  const reply = kernel.createComm(REPLY);
  reply.onMsg = (answer: KernelMessage.ICommMsgMsg) => {
    const message = answer.content.data as unknown as InsertMessage | EditMessage | { op: 'probe' };
    let result: string[] | string;
    try {
      if (message.op === 'insert') {
        result = insertInto(panel, message);
      } else if (message.op === 'edit') {
        result = editIn(panel, message);
      } else if (message.op === 'probe') {
        result = []; // the notebook is open here: the kernel writes no file under it
      } else {
        return;
      }
    } catch (error) {
      result = String(error);
    }
    reply.send(
      typeof result === 'string' ? { op: 'error', message: result } : { op: 'done', ids: result }
    );
  };
  reply.open({ request: data.request ?? '', client });
}
