/**
 * The Sources under a knowledge-base answer in the panel, as the cell shows them
 * (deeptutor_jupyter/kernel/turn_plan.py): one line per passage, numbered as the answer's
 * `[n]`, only the passages the answer cites (all of them, said so, when it cites none).
 */
import { __ } from './i18n';

export interface SourceItem {
  n: number;
  label: string;
  path: string;
}

export interface SourceList {
  heading: string;
  items: SourceItem[];
}

const MARKER = /\[(\d{1,3})\](?!\()/g;

/** The `[n]` an answer uses (not `[text](link)` links). */
export function citedNumbers(answer: string): Set<number> {
  return new Set([...answer.matchAll(MARKER)].map(m => Number(m[1])));
}

function labelOf(hit: Record<string, unknown>): string {
  const where = [String(hit.file ?? hit.path ?? '')];
  if (typeof hit.cell === 'number') {
    where.push(__('cell %1', hit.cell + 1));
  }
  if (hit.page !== undefined && hit.page !== null) {
    where.push(__('page %1', hit.page));
  }
  const title = typeof hit.title === 'string' && hit.title ? ` · ${hit.title}` : '';
  return where.join(', ') + title;
}

export function sourceList(hits: readonly Record<string, unknown>[], answer: string): SourceList {
  const seen = new Set<string>();
  const numbered = new Map<number, SourceItem>();
  let position = 0;
  for (const hit of hits) {
    const key = String(hit.chunk_id);
    if (seen.has(key)) {
      continue;
    }
    seen.add(key);
    position += 1;
    const n = typeof hit.n === 'number' ? hit.n : position;
    if (!numbered.has(n)) {
      numbered.set(n, { n, label: labelOf(hit), path: String(hit.path ?? hit.file ?? '') });
    }
  }
  const all = [...numbered.values()].sort((a, b) => a.n - b.n);
  const cited = citedNumbers(answer);
  const used = all.filter(item => cited.has(item.n));
  if (used.length > 0) {
    return { heading: __('Sources'), items: used };
  }
  return { heading: __('Passages the tutor read (none cited)'), items: all };
}
