/**
 * After a kernel restart the tutor's widgets are dead: their buttons look live but nothing
 * answers them. Each tutor output (marked by VIEW_MIME beside the widget, kernel/display.py)
 * then shows its saved Markdown instead, which says what to do ("run %tutor pending...").
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

export const VIEW_MIME = 'application/vnd.deeptutor.view+json';
const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

/** What this module needs of a code cell's output list (an IOutputAreaModel). */
interface Outputs {
  readonly length: number;
  get(index: number): { data: unknown; toJSON(): unknown };
  set(index: number, value: unknown): void;
}

/** The data of an output without its dead widget, or null when it is not a tutor widget. */
export function withoutDeadWidget(data: Record<string, unknown>): Record<string, unknown> | null {
  if (!(VIEW_MIME in data) || !(WIDGET_MIME in data) || !('text/markdown' in data)) {
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
export function settle(panel: NotebookPanel): number {
  let replaced = 0;
  for (const cell of panel.content.widgets) {
    if (cell.model.type !== 'code') {
      continue;
    }
    const outputs = (cell.model as unknown as { outputs: Outputs }).outputs;
    for (let i = 0; i < outputs.length; i++) {
      const item = outputs.get(i);
      const data = withoutDeadWidget(item.data as Record<string, unknown>);
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

export function settleOnRestart(notebooks: INotebookTracker): void {
  notebooks.widgetAdded.connect((_, panel) => {
    panel.sessionContext.statusChanged.connect((_context, status) => {
      if (status === 'restarting' || status === 'autorestarting') {
        settle(panel);
      }
    });
  });
}
