/**
 * The wire between the panel and the kernel (comm target `deeptutor`) and the server
 * (`/deeptutor/api/...`). docs/sidebar.md describes the same shapes in prose; the kernel side is
 * deeptutor_jupyter/kernel/comm.py.
 */

import { ASK_MODES as MODES_OF_ASK_USER } from './contracts';
import { AskOption, AskUserPayload, Submission as SubmissionFields } from './schema';

/** The comm target the kernel registers (kernel/comm.py `TARGET`). */
export const COMM_TARGET = 'deeptutor';

/** The MIME type of a saved turn's trace (memory/trace.py `TRACE_MIME`). */
export const TRACE_MIME = 'application/vnd.deeptutor.trace+json';

// Every shape on the wire is generated from the runtime's pydantic models (schema.ts: events,
// the ask_user payload, the comm's messages, the server's reads); this file only names them.
export type {
  AnswerAction,
  AnsweredMessage,
  AskAction,
  AskOption,
  AskUserPayload,
  Conversation,
  ErrorMessage,
  EventMessage,
  EventType,
  KernelMessage,
  NewAction,
  PanelAction,
  PendingQuestion,
  PendingQuiz,
  StopAction,
  SubscribeAction,
  SwitchAction,
  TraceRecord,
  TurnEvent,
  TurnsMessage,
  TurnSummary
} from './schema';

export type AskMode = AskUserPayload['mode'];

/** The seven modes, generated from interaction/schema.py `Mode` (contracts.ts). */
export const ASK_MODES: readonly AskMode[] = MODES_OF_ASK_USER;

/** An answer as the form sends it: all three fields, always. */
export type Submission = Required<SubmissionFields>;

export type InputOption = AskOption;

/** A question as a form shows it: an event's payload, or a pending question of the server. */
export interface InputRequest extends Omit<AskUserPayload, 'session_id' | 'expires_at'> {
  session_id?: string;
  expires_at?: number;
}
