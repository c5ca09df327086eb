/**
 * Context from the notebook as attachments of the next question: a cell (by the [N] the learner
 * sees), a file from the file browser, the selected text. The kernel reads each with the
 * notebook-context tools (kernel/attachments.py) and the turn shows it as a card. Pure functions
 * of the cell's JSON and of the drag's data, so they are tested without JupyterLab.
 */
import { __ } from './i18n';
import { Attachment } from './schema';

export type { Attachment } from './schema';

export interface CellLike {
  cell_type: string;
  source: string | string[];
  execution_count?: number | null;
  outputs?: unknown[];
}

/** An attachment waiting in the chat box; `error` is the kernel's refusal of it, in words. */
export interface Chip {
  attachment: Attachment;
  error?: string;
}

/** JupyterLab's drag data: cells from a notebook, paths from the file browser. */
export const CELLS_MIME = 'application/vnd.jupyter.cells';
export const CONTENTS_MIME = 'application/x-jupyter-icontents';
export const MAX_CHIPS = 10; // kernel/comm_messages.py AskAction.attachments

const ANSI = new RegExp(String.fromCharCode(27) + '\\[[0-9;]*[A-Za-z]', 'g');

function text(value: string | string[]): string {
  return Array.isArray(value) ? value.join('') : value;
}

/** The first error output of a cell, as plain text (ANSI colours removed); null if none. */
export function errorOf(cell: CellLike): string | null {
  for (const output of cell.outputs ?? []) {
    const o = output as Record<string, unknown>;
    if (o.output_type === 'error') {
      const lines = Array.isArray(o.traceback) ? (o.traceback as string[]) : [];
      const tb = lines.join('\n').replace(ANSI, '');
      return tb || `${String(o.ename)}: ${String(o.evalue)}`;
    }
  }
  return null;
}

/** A cell as an attachment: its [N] when it ran; what it shows stands in when it did not. */
export function cellAttachment(cell: CellLike): Attachment {
  const count = cell.cell_type === 'code' ? cell.execution_count : null;
  return {
    kind: 'cell',
    number: typeof count === 'number' && count > 0 ? count : null,
    cell_type: cell.cell_type,
    source: text(cell.source),
    error: errorOf(cell) ?? ''
  };
}

export function quoteAttachment(selected: string, number: number | null): Attachment | null {
  return selected.trim() ? { kind: 'quote', text: selected, number } : null;
}

/** The question "Explain this error" asks; the traceback goes as the cell's attachment. */
export function explainErrorQuestion(): string {
  return __('Explain this error and how I can fix it.');
}

export interface DropData {
  hasData(mime: string): boolean;
  getData(mime: string): unknown;
}

/** What a drop onto the chat box attaches: dragged cells, or files (never folders). */
export function attachmentsFromDrop(data: DropData): Attachment[] {
  if (data.hasData(CELLS_MIME)) {
    const cells = data.getData(CELLS_MIME);
    return (Array.isArray(cells) ? cells : [])
      .filter(isCell)
      .filter(cell => text(cell.source).trim() !== '')
      .map(cellAttachment);
  }
  if (data.hasData(CONTENTS_MIME)) {
    const paths = data.getData(CONTENTS_MIME);
    const list = Array.isArray(paths) ? paths : [paths];
    return list
      .filter((p): p is string => typeof p === 'string' && p.trim() !== '')
      .map(path => ({ kind: 'file', path }));
  }
  return [];
}

/** True when a drag carries something the chat box takes. */
export function canDrop(data: DropData): boolean {
  return data.hasData(CELLS_MIME) || data.hasData(CONTENTS_MIME);
}

function isCell(value: unknown): value is CellLike {
  const v = value as Record<string, unknown> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.cell_type === 'string' &&
    (typeof v.source === 'string' || Array.isArray(v.source))
  );
}

/** Two attachments of the same thing: the second adds nothing. */
export function chipKey(a: Attachment): string {
  switch (a.kind) {
    case 'cell':
      return a.number ? `cell:${a.number}` : `cell-source:${a.source ?? ''}`;
    case 'file':
      return `file:${a.path.replace(/^\/+/, '')}`;
    case 'quote':
      return `quote:${a.number ?? ''}:${a.text}`;
  }
}

/** The chips with `added` after them: no duplicates, at most MAX_CHIPS (the oldest stay). */
export function addChips(chips: readonly Chip[], added: readonly Attachment[]): Chip[] {
  const out = [...chips];
  const seen = new Set(chips.map(c => chipKey(c.attachment)));
  for (const attachment of added) {
    const key = chipKey(attachment);
    if (!seen.has(key) && out.length < MAX_CHIPS) {
      seen.add(key);
      out.push({ attachment });
    }
  }
  return out;
}

export function removeChip(chips: readonly Chip[], index: number): Chip[] {
  return chips.filter((_, i) => i !== index);
}

/** The chip refused by the kernel (ErrorMessage.attachment) marked with its reason. */
export function markChip(chips: readonly Chip[], index: number, error: string): Chip[] {
  return chips.map((chip, i) => (i === index ? { ...chip, error } : chip));
}

function short(value: string, limit: number): string {
  const line = value.trim().split('\n')[0];
  return line.length > limit ? `${line.slice(0, limit - 1)}\u2026` : line;
}

/** What a chip says: "Cell [3]", "notes.md", "“np.dot(a, b)”". */
export function chipLabel(a: Attachment): string {
  switch (a.kind) {
    case 'cell':
      if (a.number) {
        return __('Cell [%1]', a.number);
      }
      return a.cell_type === 'markdown'
        ? __('Markdown cell: %1', short(a.source ?? '', 24))
        : __('Cell (not run): %1', short(a.source ?? '', 24));
    case 'file':
      return a.path.split('/').pop() || a.path;
    case 'quote':
      return `\u201c${short(a.text, 30)}\u201d`;
  }
}
