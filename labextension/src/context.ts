/**
 * Questions built from the notebook: a cell quoted as context, and an error output with its
 * cell's source. Pure functions of the cell's JSON, so they are tested without JupyterLab.
 */
import { __ } from './i18n';

export interface CellLike {
  cell_type: string;
  source: string | string[];
  outputs?: unknown[];
}

const ANSI = new RegExp(String.fromCharCode(27) + '\\[[0-9;]*[A-Za-z]', 'g');

function text(value: string | string[]): string {
  return Array.isArray(value) ? value.join('') : value;
}

function fence(body: string, lang = ''): string {
  const longest = Math.max(2, ...(body.match(/`+/g) ?? []).map(m => m.length));
  const ticks = '`'.repeat(longest + 1);
  return `${ticks}${lang}\n${body.replace(/\n$/, '')}\n${ticks}`;
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

/** The draft a learner completes: the cell quoted, the question still to type. */
export function aboutCellDraft(cell: CellLike, index: number): string {
  const lang = cell.cell_type === 'code' ? 'python' : '';
  return `${__('About cell [%1]:', index + 1)}\n${fence(text(cell.source), lang)}\n\n`;
}

/** The question "Explain this error" sends: the error and the source that raised it. */
export function explainErrorQuestion(cell: CellLike, index: number): string | null {
  const error = errorOf(cell);
  if (error === null) {
    return null;
  }
  return (
    `${__('Explain this error from cell [%1] and how I can fix it.', index + 1)}\n\n` +
    `${fence(text(cell.source), 'python')}\n\n${fence(error)}`
  );
}
