/**
 * The wire between the panel and the kernel (comm target `deeptutor`) and the server
 * (`/deeptutor/api/...`). docs/sidebar.md describes the same shapes in prose; the kernel side is
 * deeptutor_jupyter/kernel/comm.py.
 */

import { AskOption, AskUserPayload, Submission as SubmissionFields, TurnEvent } from './schema';

/** The comm target the kernel registers (kernel/comm.py `TARGET`). */
export const COMM_TARGET = 'deeptutor';

/** The MIME type of a saved turn's trace (memory/trace.py `TRACE_MIME`). */
export const TRACE_MIME = 'application/vnd.deeptutor.trace+json';

// The shapes the runtime defines are generated from its pydantic models (schema.ts); only the
// comm's own messages are declared here.
export type {
  AskOption,
  AskUserPayload,
  EventType,
  PendingQuestion,
  TraceRecord,
  TurnEvent
} from './schema';

export type AskMode = AskUserPayload['mode'];

export const ASK_MODES: readonly AskMode[] = [
  'single',
  'multiple',
  'text',
  'number',
  'date',
  'directory',
  'toggle'
];

/** An answer as the form sends it: all three fields, always. */
export type Submission = Required<SubmissionFields>;

export type InputOption = AskOption;

/** A question as a form shows it: an event's payload, or a pending question of the server. */
export interface InputRequest extends Omit<AskUserPayload, 'session_id' | 'expires_at'> {
  session_id?: string;
  expires_at?: number;
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
  result: Submission & { reason?: string };
}

/** A refused action, in words (bad input, no settings, unknown turn...). */
export interface ErrorMessage {
  type: 'error';
  action: string;
  message: string;
  code?: string;
}

export type KernelMessage = EventMessage | TurnsMessage | AnsweredMessage | ErrorMessage;
