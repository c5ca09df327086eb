/**
 * The chat as the panel shows it, folded from runtime events (runtime/events.py) in seq order.
 * Pure: the same events always give the same turns, so a reload that replays `after_seq`
 * rebuilds the panel exactly, and a repeated event (seq already seen) changes nothing.
 */
import { toInputRequest } from './askuser';
import { InputRequest, TurnEvent } from './protocol';
import { QuizRequired, QuizResolved, UserInputResolved } from './schema';
import { Settled } from './form';

export interface ToolCard {
  id: string;
  name: string;
  summary: string;
  isError: boolean;
  done: boolean;
  /** What the tool gave the model: shown for the context the learner attached. */
  content: string;
}

/** A make_quiz form of the turn, and its graded (or closed) result once there is one. */
export interface QuizState {
  quiz: QuizRequired;
  resolved: QuizResolved | null;
}

/** Tools that read context the learner attached (kernel/attachments.py): their cards open. */
export const CONTEXT_TOOLS = ['read_cell', 'read_file', 'selected_text'];

export interface Question {
  request: InputRequest;
  settled: Settled | null;
}

/** What the turn shows, in the order it happened: answer text between tool and question cards. */
export type Block =
  | { kind: 'text'; text: string }
  | { kind: 'tool'; id: string }
  | { kind: 'question'; id: string }
  | { kind: 'quiz'; id: string };

export interface ChatTurn {
  turnId: string;
  question: string;
  answer: string;
  blocks: Block[];
  status: 'running' | 'waiting' | 'done' | 'cancelled' | 'error';
  tools: ToolCard[];
  questions: Question[];
  quizzes: QuizState[];
  errors: string[];
  notices: string[];
  /** The knowledge-base passages the turn read (a `sources` event), for its Sources list. */
  sources: Record<string, unknown>[];
  /** The model and knowledge bases the turn used (its `turn_started`), for its trace line. */
  model: string;
  kbs: string[];
  lastSeq: number;
}

export function newTurn(turnId: string, question: string): ChatTurn {
  return {
    turnId,
    question,
    answer: '',
    blocks: [],
    status: 'running',
    tools: [],
    questions: [],
    quizzes: [],
    errors: [],
    notices: [],
    sources: [],
    model: '',
    kbs: [],
    lastSeq: 0
  };
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The turn after one event; the same object when the event was seen already. */
export function applyEvent(turn: ChatTurn, event: TurnEvent): ChatTurn {
  if (event.seq <= turn.lastSeq) {
    return turn;
  }
  const next: ChatTurn = { ...turn, lastSeq: event.seq };
  switch (event.type) {
    case 'turn_started':
      // The kernel's summary gave the learner's words; the event has the question sent, which
      // for `%tutor why` or `--cell N` holds a traceback or a cell's code (kept in the trace).
      next.question = turn.question || text(event.question);
      next.model = text(event.model);
      next.kbs = Array.isArray(event.kbs) ? event.kbs.map(String) : [];
      break;
    case 'content': {
      const delta = text(event.text);
      next.answer = turn.answer + delta;
      next.blocks = appendText(turn.blocks, delta);
      break;
    }
    case 'tool_call': {
      const id = text(event.id) || `tool-${event.seq}`;
      if (text(event.name) === 'ask_user' || text(event.name) === 'make_quiz') {
        break; // shown as its question or quiz card, not as a tool card
      }
      next.tools = [
        ...turn.tools,
        { id, name: text(event.name), summary: '', isError: false, done: false, content: '' }
      ];
      next.blocks = [...turn.blocks, { kind: 'tool', id }];
      break;
    }
    case 'tool_result': {
      const id = text(event.id);
      const index = findToolIndex(turn.tools, id);
      if (index >= 0) {
        next.tools = turn.tools.map((tool, i) =>
          i === index
            ? {
                ...tool,
                summary: text(event.summary),
                isError: event.is_error === true,
                done: true,
                content: CONTEXT_TOOLS.includes(tool.name) ? text(event.content) : ''
              }
            : tool
        );
      }
      break;
    }
    case 'user_input_required': {
      const request = toInputRequest(event);
      if (request) {
        next.questions = [...turn.questions, { request, settled: null }];
        next.blocks = [...turn.blocks, { kind: 'question', id: request.id }];
        next.status = 'waiting';
      }
      break;
    }
    case 'user_input_resolved':
      next.questions = turn.questions.map(q =>
        q.request.id === event.id ? { ...q, settled: settledOf(event) } : q
      );
      next.status = 'running';
      break;
    case 'error':
      next.errors = [...turn.errors, text(event.message)];
      break;
    case 'notice':
      next.notices = [...turn.notices, text(event.text)];
      break;
    case 'sources':
      next.sources = Array.isArray(event.hits) ? event.hits : [];
      break;
    case 'quiz_required':
      next.quizzes = [...turn.quizzes, { quiz: event, resolved: null }];
      next.blocks = [...turn.blocks, { kind: 'quiz', id: event.id }];
      next.status = 'waiting';
      break;
    case 'quiz_resolved':
      next.quizzes = turn.quizzes.map(q =>
        q.quiz.id === event.id ? { ...q, resolved: event } : q
      );
      next.status = 'running';
      break;
    case 'done': {
      const status = text(event.status);
      next.status = status === 'cancelled' ? 'cancelled' : status === 'error' ? 'error' : 'done';
      // The final answer stands in only when no text was streamed (a replay without deltas).
      if (!turn.answer && typeof event.answer === 'string' && event.answer) {
        next.answer = event.answer;
        next.blocks = appendText(turn.blocks, event.answer);
      }
      break;
    }
    default:
      break;
  }
  return next;
}

function appendText(blocks: Block[], delta: string): Block[] {
  if (!delta) {
    return blocks;
  }
  const last = blocks[blocks.length - 1];
  if (last && last.kind === 'text') {
    return [...blocks.slice(0, -1), { kind: 'text', text: last.text + delta }];
  }
  return [...blocks, { kind: 'text', text: delta }];
}

function findToolIndex(tools: ToolCard[], id: string): number {
  const byId = tools.findIndex(t => t.id === id && !t.done);
  return byId >= 0 ? byId : tools.findIndex(t => !t.done);
}

function settledOf(event: UserInputResolved): Settled {
  return {
    selections: event.selections ?? [],
    custom_input: event.custom_input ?? '',
    cancelled: event.cancelled === true,
    reason: event.reason ?? ''
  };
}
