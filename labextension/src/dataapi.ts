/**
 * The Memory and Knowledge tabs' writes (deeptutor_jupyter/server/memory_api.py, kb_api.py):
 * delete an entry or a document, consolidate through a preview, add a knowledge base.
 */
import { request } from './api';
import {
  AddKnowledgeBaseRequest,
  ApplyReply,
  ConsolidationPreview,
  DELETE_REASONS,
  DiscardReply,
  DocumentsReply,
  JobReply,
  KbJob,
  KnowledgeState,
  MODES,
  MemoryDocument,
  PreviewReply,
  PreviewRequest
} from './contracts';

// The bodies and lists are generated from the server's models (contracts.ts); named here.
export type {
  ConsolidationPreview,
  KnowledgeState,
  MemoryDocument,
  MemoryEntry,
  PreviewChange,
  PreviewTrace
} from './contracts';
export { DELETE_REASONS, MODES };
export type DeleteReason = (typeof DELETE_REASONS)[number];
export type Mode = (typeof MODES)[number];

function docPath(layer: string, key: string, ...rest: string[]): string {
  return ['memory', layer, key, ...rest].map(encodeURIComponent).join('/');
}

export async function deleteEntry(
  layer: string,
  key: string,
  entryId: string,
  reason: DeleteReason
): Promise<MemoryDocument[]> {
  const path = `${docPath(layer, key, entryId)}?reason=${encodeURIComponent(reason)}`;
  return (await request<DocumentsReply>(path, { method: 'DELETE' })).documents;
}

export async function deleteDocument(layer: string, key: string): Promise<MemoryDocument[]> {
  const path = docPath(layer, key);
  return (await request<DocumentsReply>(path, { method: 'DELETE' })).documents;
}

export async function previewConsolidation(
  layer: string,
  key: string,
  mode: Mode
): Promise<ConsolidationPreview> {
  const body: PreviewRequest = { mode };
  const path = docPath(layer, key, 'preview');
  const reply = await request<PreviewReply>(path, { method: 'POST', body: JSON.stringify(body) });
  return reply.preview;
}

/** Write exactly the preview; refused with code `stale` when the document changed since. */
export async function applyPreview(id: string): Promise<MemoryDocument[]> {
  const path = `memory/previews/${encodeURIComponent(id)}`;
  const reply = await request<ApplyReply>(path, { method: 'POST', body: '{}' });
  return reply.documents;
}

export async function discardPreview(id: string): Promise<void> {
  await request<DiscardReply>(`memory/previews/${encodeURIComponent(id)}`, { method: 'DELETE' });
}

export async function fetchKnowledge(): Promise<KnowledgeState> {
  const reply = await request<Partial<KnowledgeState>>('kbs');
  return { kbs: reply.kbs ?? [], jobs: reply.jobs ?? [] };
}

/** Index a folder or file, `path` relative to the server's root; the job runs on the server. */
export async function addKnowledgeBase(name: string, path: string): Promise<KbJob> {
  const body: AddKnowledgeBaseRequest = { name, path };
  const reply = await request<JobReply>('kbs', { method: 'POST', body: JSON.stringify(body) });
  return reply.job;
}

/** The questions of the newest turns, by trace id: what the Memory tab quotes as provenance. */
export async function fetchTraceQuestions(limit = 1000): Promise<Map<string, string>> {
  const reply = await request<{ traces: { trace_id: string; question: string }[] }>(
    `traces?limit=${limit}`
  );
  return new Map(reply.traces.map(t => [t.trace_id, t.question]));
}
