/**
 * Pure rules of the Memory and Knowledge tabs (unit-tested): the default name of a knowledge
 * base added from the file browser, the words of an indexing job's progress, the poll's pace,
 * and the rows of a consolidation preview's diff.
 */
import { KbJob } from './contracts';
import { __ } from './i18n';

/** What the server accepts as a knowledge base name (knowledge/model.py, validate_kb_name). */
export const KB_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Poll while a job runs: two reads a second, however fast the indexer reports. */
export const JOB_POLL_MS = 500;

/**
 * A folder's (or file's) name made into a valid knowledge base name: "Week 1: Linear algebra"
 * becomes "Week-1-Linear-algebra"; a file loses its extension; "" when nothing is left.
 */
export function defaultKbName(path: string): string {
  const last = path.split('/').filter(Boolean).pop() ?? '';
  const stem = last.includes('.') && !last.startsWith('.') ? last.replace(/\.[^.]*$/, '') : last;
  return stem
    .replace(/[^A-Za-z0-9_-]+/g, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64);
}

export type { KbJob };

/** 0..1, or null while the indexer has not counted the work yet. */
export function jobFraction(job: KbJob): number | null {
  if (job.state !== 'running') {
    return 1;
  }
  return job.total > 0 ? Math.min(1, job.done / job.total) : null;
}

/** One line under a job's bar. */
export function jobLine(job: KbJob): string {
  if (job.state === 'failed') {
    return __('Indexing %1 failed: %2', job.path, job.errors.join('; '));
  }
  if (job.state === 'done') {
    return __('Indexed %1: %2', job.path, job.summary);
  }
  const fraction = jobFraction(job);
  if (fraction === null) {
    return __('Indexing %1: looking for files…', job.path);
  }
  const percent = Math.floor(fraction * 100);
  return job.current
    ? __('Indexing %1: %2% (%3)', job.path, percent, job.current)
    : __('Indexing %1: %2%', job.path, percent);
}

/** The newest job of each knowledge base, so a re-add replaces the line of the last one. */
export function latestJobs(jobs: KbJob[]): KbJob[] {
  const byName = new Map<string, KbJob>();
  for (const job of [...jobs].sort((a, b) => a.started_at - b.started_at)) {
    byName.set(job.name, job);
  }
  return [...byName.values()];
}

export function anyRunning(jobs: KbJob[]): boolean {
  return jobs.some(job => job.state === 'running');
}

export interface DiffRow {
  kind: 'add' | 'remove' | 'same';
  text: string;
}

/**
 * The lines of a unified diff as rows to colour. The file headers and hunk markers are dropped
 * (the preview names its document already); a document's own "---" line is kept.
 */
export function diffRows(diff: string): DiffRow[] {
  const rows: DiffRow[] = [];
  let inHunk = false;
  for (const line of diff.split('\n')) {
    if (line.startsWith('@@')) {
      inHunk = true;
    } else if (!inHunk) {
      continue; // "--- a/..." and "+++ b/..."
    } else if (line.startsWith('+')) {
      rows.push({ kind: 'add', text: line.slice(1) });
    } else if (line.startsWith('-')) {
      rows.push({ kind: 'remove', text: line.slice(1) });
    } else if (line.startsWith(' ')) {
      rows.push({ kind: 'same', text: line.slice(1) });
    }
  }
  return rows;
}

/**
 * The folders and files a knowledge base indexes, relative to its root when under it: "from
 * course/week1, notes.md". Paths are the server's (absolute, "/"-separated).
 */
export function sourcesLine(root: unknown, sources: unknown): string {
  if (!Array.isArray(sources) || sources.length === 0) {
    return '';
  }
  const base = typeof root === 'string' ? root.replace(/\/+$/, '') : '';
  const shown = sources.map(source => {
    const path = String(source);
    if (base && path === base) {
      return '.';
    }
    return base && path.startsWith(`${base}/`) ? path.slice(base.length + 1) : path;
  });
  return __('from %1', shown.join(', '));
}

/** How much of a question a provenance line quotes. */
export const QUOTE_CHARS = 60;

/**
 * Where an entry comes from, in the learner's words: the questions of the turns it cites
 * ("from “What is rank?”"), an id where the turn is not known (any more), or that it was
 * written by hand.
 */
export function provenance(refs: string[], questions: ReadonlyMap<string, string>): string {
  if (refs.length === 0) {
    return __('written by hand (no trace)');
  }
  const shown = refs.map(ref => {
    const question = (questions.get(ref) ?? '').replace(/\s+/g, ' ').trim();
    if (!question) {
      return ref;
    }
    const cut =
      question.length > QUOTE_CHARS ? `${question.slice(0, QUOTE_CHARS - 1).trimEnd()}…` : question;
    return `“${cut}”`;
  });
  return __('from %1', shown.join(', '));
}

/** Who listens for jobs started outside the tab (the file browser's context menu). */
const jobListeners = new Set<() => void>();

export function onJobStarted(listener: () => void): () => void {
  jobListeners.add(listener);
  return () => jobListeners.delete(listener);
}

export function jobStarted(): void {
  jobListeners.forEach(listener => listener());
}
