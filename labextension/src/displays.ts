/**
 * The tutor's outputs in the saved notebook stay true (each is marked by VIEW_MIME beside its
 * widget, kernel/display.py):
 * - after a kernel restart the tutor's widgets are dead: their buttons look live but nothing
 *   answers them. Each then shows its saved Markdown instead, which says what to do ("run
 *   %tutor pending...");
 * - after a page reload JupyterLab forgets which output a display id belongs to, so the final
 *   `update_display_data` of a turn (its answer and trace) would never reach the file. The
 *   marker carries the display id, and the update is applied to that output here.
 */
import { KernelMessage } from '@jupyterlab/services';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

export const VIEW_MIME = 'application/vnd.deeptutor.view+json';
const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

/** What this module needs of a code cell's output list (an IOutputAreaModel). */
interface Outputs {
  readonly length: number;
  get(index: number): { data: unknown; toJSON(): unknown };
  set(index: number, value: unknown): void;
}

/**
 * The data of an output without its dead widget, or null when it is not a tutor widget (or its
 * model is among `alive`, the widget comms the kernel has open: that widget still works).
 */
export function withoutDeadWidget(
  data: Record<string, unknown>,
  alive?: ReadonlySet<string>
): Record<string, unknown> | null {
  if (!(VIEW_MIME in data) || !(WIDGET_MIME in data) || !('text/markdown' in data)) {
    return null;
  }
  const view = data[WIDGET_MIME] as { model_id?: unknown } | undefined;
  if (alive && typeof view?.model_id === 'string' && alive.has(view.model_id)) {
    return null;
  }
  const rest: Record<string, unknown> = {};
  for (const [mime, value] of Object.entries(data)) {
    if (mime !== WIDGET_MIME) {
      rest[mime] = value;
    }
  }
  return rest;
}

/** Replace the dead tutor widgets of one notebook by their Markdown; how many were replaced. */
export function settle(panel: NotebookPanel, alive?: ReadonlySet<string>): number {
  let replaced = 0;
  for (const cell of panel.content.widgets) {
    if (cell.model.type !== 'code') {
      continue;
    }
    const outputs = (cell.model as unknown as { outputs: Outputs }).outputs;
    for (let i = 0; i < outputs.length; i++) {
      const item = outputs.get(i);
      const data = withoutDeadWidget(item.data as Record<string, unknown>, alive);
      if (data === null) {
        continue;
      }
      const json = item.toJSON() as Record<string, unknown>;
      outputs.set(i, { ...json, data });
      replaced++;
    }
  }
  return replaced;
}

/** The display id an output's marker carries, if it is a tutor output. */
export function displayIdOf(data: Record<string, unknown>): string | null {
  const view = data[VIEW_MIME] as { display_id?: unknown } | undefined;
  return view && typeof view.display_id === 'string' ? view.display_id : null;
}

/** Apply an update to every tutor output of that display id; how many were updated. */
export function applyUpdate(
  panel: NotebookPanel,
  displayId: string,
  data: Record<string, unknown>,
  metadata: Record<string, unknown>
): number {
  let updated = 0;
  for (const cell of panel.content.widgets) {
    if (cell.model.type !== 'code') {
      continue;
    }
    const outputs = (cell.model as unknown as { outputs: Outputs }).outputs;
    for (let i = 0; i < outputs.length; i++) {
      const item = outputs.get(i);
      if (displayIdOf(item.data as Record<string, unknown>) !== displayId) {
        continue;
      }
      const json = item.toJSON() as Record<string, unknown>;
      outputs.set(i, { ...json, data, metadata });
      updated++;
    }
  }
  return updated;
}

/**
 * A notebook opened the next day: its tutor widgets belong to a kernel that is gone. Once the
 * session is ready, every tutor widget whose model the kernel (if any) does not hold shows its
 * Markdown, instead of "Error displaying widget: model not found". After a mere page reload the
 * kernel still holds the models, and those widgets stay live.
 */
async function settleOnOpen(panel: NotebookPanel): Promise<void> {
  await panel.sessionContext.ready;
  const kernel = panel.sessionContext.session?.kernel;
  let alive = new Set<string>();
  if (kernel) {
    try {
      const reply = await kernel.requestCommInfo({ target_name: 'jupyter.widget' });
      const comms = (reply.content as { comms?: Record<string, unknown> }).comms ?? {};
      alive = new Set(Object.keys(comms));
    } catch {
      return; // no answer: better a live-looking widget than hiding a working one
    }
  }
  settle(panel, alive);
}

export function keepOutputsTrue(notebooks: INotebookTracker): void {
  notebooks.widgetAdded.connect((_, panel) => {
    void settleOnOpen(panel);
    panel.sessionContext.statusChanged.connect((_context, status) => {
      if (status === 'restarting' || status === 'autorestarting') {
        settle(panel);
      }
    });
    panel.sessionContext.iopubMessage.connect((_context, message) => {
      if (!KernelMessage.isUpdateDisplayDataMsg(message)) {
        return;
      }
      const displayId = message.content.transient?.display_id;
      if (typeof displayId === 'string') {
        // JupyterLab applies it too when it still knows the id: the same data, set twice.
        applyUpdate(
          panel,
          displayId,
          message.content.data as Record<string, unknown>,
          (message.content.metadata ?? {}) as Record<string, unknown>
        );
      }
    });
  });
}
