/**
 * Requests to the server extension (deeptutor_jupyter/server/handlers.py) under
 * `/deeptutor/api/`. ServerConnection adds the token and the XSRF header the handlers require.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import {
  DocumentsReply,
  KnowledgeBaseInfo,
  KnowledgeState,
  MemoryDocument,
  SaveMemoryRequest
} from './contracts';
import { PendingQuestion, PendingQuiz, Submission } from './protocol';
import { __ } from './i18n';

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string
  ) {
    super(message);
  }
}

export async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'deeptutor', 'api', path);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ApiError(__('The Jupyter server did not answer: %1', String(error)), 0, 'network');
  }
  let body: Record<string, unknown> = {};
  try {
    body = await response.json();
  } catch {
    // an empty or non-JSON body: the status says enough
  }
  if (!response.ok) {
    const message =
      typeof body.message === 'string'
        ? body.message
        : __('The server refused (%1).', response.status);
    const code = typeof body.code === 'string' ? body.code : 'http';
    throw new ApiError(message, response.status, code);
  }
  return body as T;
}

/** What waits for the learner: questions, and quizzes (answered over a kernel's comm). */
export interface Waiting {
  questions: PendingQuestion[];
  quizzes: PendingQuiz[];
}

export async function fetchPending(): Promise<Waiting> {
  const reply = await request<{ pending: PendingQuestion[]; quizzes?: PendingQuiz[] }>('pending');
  return { questions: reply.pending, quizzes: reply.quizzes ?? [] };
}

export async function answerPending(
  question: PendingQuestion,
  answer: Submission
): Promise<Record<string, unknown>> {
  const body = {
    session_id: question.session_id,
    selections: answer.selections,
    custom_input: answer.custom_input,
    cancelled: answer.cancelled
  };
  const path = `pending/${encodeURIComponent(question.id)}`;
  const reply = await request<{ result: Record<string, unknown> }>(path, {
    method: 'POST',
    body: JSON.stringify(body)
  });
  return reply.result;
}

export type { KnowledgeBaseInfo, MemoryDocument };

export async function fetchMemory(): Promise<MemoryDocument[]> {
  return (await request<DocumentsReply>('memory')).documents;
}

/** Save a human's edit of one memory document; refused in words if it does not parse. */
export async function saveMemory(
  layer: string,
  key: string,
  text: string
): Promise<MemoryDocument[]> {
  const path = `memory/${encodeURIComponent(layer)}/${encodeURIComponent(key)}`;
  const body: SaveMemoryRequest = { text };
  const reply = await request<DocumentsReply>(path, { method: 'PUT', body: JSON.stringify(body) });
  return reply.documents;
}

export async function fetchKnowledgeBases(): Promise<KnowledgeBaseInfo[]> {
  return (await request<KnowledgeState>('kbs')).kbs;
}

/** Remove a knowledge base's index (the source files stay). */
export async function removeKnowledgeBase(name: string): Promise<KnowledgeBaseInfo[]> {
  const path = `kbs/${encodeURIComponent(name)}`;
  return (await request<KnowledgeState>(path, { method: 'DELETE' })).kbs;
}

type Send = (path: string, init: RequestInit) => Promise<unknown>;

/**
 * Tell the server JupyterLab's language (`ITranslator.languageCode`, e.g. `zh-CN`): the
 * tutor's forms in cells follow it unless the learner chose a language (`--language`).
 */
export async function reportLanguage(code: string, send: Send = request): Promise<void> {
  if (code) {
    await send('language', { method: 'PUT', body: JSON.stringify({ language: code }) });
  }
}
