/**
 * The Memory and Knowledge tabs' writes (deeptutor_jupyter/server/memory_api.py, kb_api.py):
 * delete an entry or a document, consolidate through a preview, add a knowledge base.
 */
import { KnowledgeBaseInfo, MemoryDocument, request } from './api';
import { KbJob } from './knowledge';

export interface MemoryEntry {
  id: string;
  section: string;
  text: string;
  refs: string[];
}

/** A document as `GET memory` lists it, with its entries and their provenance. */
export interface MemoryDoc extends MemoryDocument {
  entries?: MemoryEntry[];
}

export const DELETE_REASONS = ['stale', 'contradicted', 'superseded', 'low-signal'] as const;
export type DeleteReason = (typeof DELETE_REASONS)[number];
export const MODES = ['update', 'audit', 'dedup', 'merge'] as const;
export type Mode = (typeof MODES)[number];

function docPath(layer: string, key: string, ...rest: string[]): string {
  return ['memory', layer, key, ...rest].map(encodeURIComponent).join('/');
}

export async function deleteEntry(
  layer: string,
  key: string,
  entryId: string,
  reason: DeleteReason
): Promise<MemoryDoc[]> {
  const path = `${docPath(layer, key, entryId)}?reason=${encodeURIComponent(reason)}`;
  return (await request<{ documents: MemoryDoc[] }>(path, { method: 'DELETE' })).documents;
}

export async function deleteDocument(layer: string, key: string): Promise<MemoryDoc[]> {
  const path = docPath(layer, key);
  return (await request<{ documents: MemoryDoc[] }>(path, { method: 'DELETE' })).documents;
}

export interface PreviewTrace {
  trace_id: string;
  question: string;
  surface: string;
  started_at: number | null;
}

/** One valid op in a learner's words (the server reads the old text from the document). */
export interface PreviewChange {
  kind: 'add' | 'edit' | 'delete';
  section: string;
  text: string;
  old_text: string;
  refs: string[];
  reason: string;
}

export interface ConsolidationPreview {
  id: string;
  layer: string;
  key: string;
  mode: Mode;
  before: string;
  after: string;
  diff: string;
  changed: boolean;
  has_work: boolean;
  ops: Record<string, unknown>[];
  changes: PreviewChange[];
  rejected: { op: Record<string, unknown>; reason: string }[];
  traces: PreviewTrace[];
}

export async function previewConsolidation(
  layer: string,
  key: string,
  mode: Mode
): Promise<ConsolidationPreview> {
  const reply = await request<{ preview: ConsolidationPreview }>(docPath(layer, key, 'preview'), {
    method: 'POST',
    body: JSON.stringify({ mode })
  });
  return reply.preview;
}

/** Write exactly the preview; refused with code `stale` when the document changed since. */
export async function applyPreview(id: string): Promise<MemoryDoc[]> {
  const path = `memory/previews/${encodeURIComponent(id)}`;
  const reply = await request<{ documents: MemoryDoc[] }>(path, { method: 'POST', body: '{}' });
  return reply.documents;
}

export async function discardPreview(id: string): Promise<void> {
  await request(`memory/previews/${encodeURIComponent(id)}`, { method: 'DELETE' });
}

export interface KnowledgeState {
  kbs: KnowledgeBaseInfo[];
  jobs: KbJob[];
}

export async function fetchKnowledge(): Promise<KnowledgeState> {
  const reply = await request<Partial<KnowledgeState>>('kbs');
  return { kbs: reply.kbs ?? [], jobs: reply.jobs ?? [] };
}

/** Index a folder or file, `path` relative to the server's root; the job runs on the server. */
export async function addKnowledgeBase(name: string, path: string): Promise<KbJob> {
  const reply = await request<{ job: KbJob }>('kbs', {
    method: 'POST',
    body: JSON.stringify({ name, path })
  });
  return reply.job;
}

/** The questions of the newest turns, by trace id: what the Memory tab quotes as provenance. */
export async function fetchTraceQuestions(limit = 1000): Promise<Map<string, string>> {
  const reply = await request<{ traces: { trace_id: string; question: string }[] }>(
    `traces?limit=${limit}`
  );
  return new Map(reply.traces.map(t => [t.trace_id, t.question]));
}
