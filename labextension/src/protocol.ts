/**
 * The wire between the panel and the kernel (comm target `deeptutor`) and the server
 * (`/deeptutor/api/...`). docs/sidebar.md describes the same shapes in prose; the kernel side is
 * deeptutor_jupyter/kernel/comm.py.
 */

/** The comm target the kernel registers (kernel/comm.py `TARGET`). */
export const COMM_TARGET = 'deeptutor';

/** The MIME type of a saved turn's trace (memory/trace.py `TRACE_MIME`). */
export const TRACE_MIME = 'application/vnd.deeptutor.trace+json';

export type AskMode = 'single' | 'multiple' | 'text' | 'number' | 'date' | 'directory' | 'toggle';

export const ASK_MODES: readonly AskMode[] = [
  'single',
  'multiple',
  'text',
  'number',
  'date',
  'directory',
  'toggle'
];

export interface InputOption {
  id: string;
  label: string;
  description?: string;
  recommended?: boolean;
}

/** `user_input_required` data (interaction/schema.py `payload`). */
export interface InputRequest {
  id: string;
  toolCallId: string;
  title: string;
  mode: AskMode;
  sessionId?: string;
  description?: string;
  options?: InputOption[];
  allowCustom?: boolean;
  submitLabel?: string;
  resumable?: boolean;
  expiresAt?: number;
}

/** A pending question as `GET /deeptutor/api/pending` lists it. */
export interface PendingQuestion extends InputRequest {
  sessionId: string;
  status: string;
  turnId: string;
  createdAt: number;
  notebook: string;
}

/** What the learner sends back (the reference's `onSubmit(selections, customInput, cancelled)`). */
export interface Submission {
  selections: string[];
  customInput: string;
  cancelled: boolean;
}

// ---- panel -> kernel -----------------------------------------------------------------------

export interface AskAction {
  action: 'ask';
  question: string;
  conversation: string | null;
}

export interface StopAction {
  action: 'stop';
  turn_id: string;
}

export interface AnswerAction {
  action: 'answer';
  request_id: string;
  session_id: string;
  selections: string[];
  custom_input: string;
  cancelled: boolean;
}

export interface SubscribeAction {
  action: 'subscribe';
  turn_id: string;
  after_seq: number;
}

/** Start a fresh conversation in this notebook (its next `%tutor` cell continues it too). */
export interface NewAction {
  action: 'new';
}

/** Make another of this notebook's conversations the current one. */
export interface SwitchAction {
  action: 'switch';
  conversation: string;
}

export type PanelAction =
  AskAction | StopAction | AnswerAction | SubscribeAction | NewAction | SwitchAction;

// ---- kernel -> panel -----------------------------------------------------------------------

export type EventType =
  | 'turn_started'
  | 'round_started'
  | 'content'
  | 'thinking'
  | 'tool_call'
  | 'tool_result'
  | 'user_input_required'
  | 'user_input_resolved'
  | 'quiz_required'
  | 'quiz_resolved'
  | 'sources'
  | 'notice'
  | 'error'
  | 'done';

/** One runtime event (runtime/events.py `Event`), its data spread beside type, seq, turn_id. */
export interface TurnEvent {
  type: EventType;
  seq: number;
  turn_id: string;
  [key: string]: unknown;
}

export interface EventMessage {
  type: 'event';
  event: TurnEvent;
}

export interface TurnSummary {
  turn_id: string;
  question: string;
  status: string;
  last_seq: number;
}

export interface Conversation {
  id: string;
  title: string;
  turns: number;
  started_at: number;
}

export interface TurnsMessage {
  type: 'turns';
  session_id: string;
  notebook: string;
  turns: TurnSummary[];
  conversations: Conversation[];
}

/** An answer given over the comm was taken (its turn's `user_input_resolved` follows). */
export interface AnsweredMessage {
  type: 'answered';
  request_id: string;
  result: Submission;
}

/** A refused action, in words (bad input, no settings, unknown turn...). */
export interface ErrorMessage {
  type: 'error';
  action: string;
  message: string;
  code?: string;
}

export type KernelMessage = EventMessage | TurnsMessage | AnsweredMessage | ErrorMessage;

/** A saved turn (memory/trace.py `TraceRecord`). */
export interface TraceRecord {
  trace_id: string;
  surface?: string;
  kind?: string;
  session_id?: string;
  turn_id?: string;
  model?: string;
  started_at?: number;
  finished_at?: number;
  question: string;
  answer_summary: string;
  tools?: string[];
  ask_user?: { request_id?: string; selections?: string[]; cancelled?: boolean }[];
  status?: string;
  notebook?: string;
}
