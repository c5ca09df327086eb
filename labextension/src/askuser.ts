/**
 * The rules of the ask_user form, as pure functions (the React card in form.tsx only renders
 * them). They follow the reference protocol, section 3: check the minimal fields before
 * rendering; one control per mode; `allow_custom` adds an "other" field to the choice modes;
 * `resumable: false` shows only a notice and never sends a continue request bound to fail.
 * The answer checks are interaction/answers.py `check_answer`'s (its patterns are generated into
 * contracts.ts; answer_cases.json is checked against both sides), so the form refuses in place
 * what the kernel would refuse.
 */
import { CHOICE_MODES as OPTION_MODES, ISO_DATE_PATTERN, NUMBER_PATTERN } from './contracts';
import { ASK_MODES, AskMode, InputOption, InputRequest, Submission } from './protocol';
import { __ } from './i18n';
import { KeyLike } from './settings';

export type Control = 'radio' | 'checkbox' | 'toggle' | 'text' | 'number' | 'date' | 'directory';

const CONTROL: Record<AskMode, Control> = {
  single: 'radio',
  multiple: 'checkbox',
  toggle: 'toggle',
  text: 'text',
  number: 'number',
  date: 'date',
  directory: 'directory'
};

export const CHOICE_MODES: ReadonlySet<AskMode> = new Set<AskMode>(OPTION_MODES);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function toOption(value: unknown): InputOption | null {
  if (!isRecord(value) || typeof value.id !== 'string' || typeof value.label !== 'string') {
    return null;
  }
  return {
    id: value.id,
    label: value.label,
    description: typeof value.description === 'string' ? value.description : '',
    recommended: value.recommended === true
  };
}

/**
 * The reference's minimal check: `id`, `tool_call_id`, `title` and `mode` are strings. A mode
 * outside the seven, or a choice mode without a usable option, cannot be rendered either.
 * Returns null for anything that is not a question this form can show.
 */
export function toInputRequest(data: unknown): InputRequest | null {
  if (
    !isRecord(data) ||
    typeof data.id !== 'string' ||
    typeof data.tool_call_id !== 'string' ||
    typeof data.title !== 'string' ||
    typeof data.mode !== 'string'
  ) {
    return null;
  }
  const mode = data.mode as AskMode;
  if (!ASK_MODES.includes(mode)) {
    return null;
  }
  const raw = Array.isArray(data.options) ? data.options : [];
  const options = raw.map(toOption).filter((o): o is InputOption => o !== null);
  if (CHOICE_MODES.has(mode) && options.length === 0) {
    return null;
  }
  return {
    id: data.id,
    tool_call_id: data.tool_call_id,
    title: data.title,
    mode,
    session_id: typeof data.session_id === 'string' ? data.session_id : undefined,
    description: typeof data.description === 'string' ? data.description : '',
    options,
    allow_custom: data.allow_custom === true,
    submit_label: typeof data.submit_label === 'string' ? data.submit_label : '',
    resumable: data.resumable !== false,
    expires_at: typeof data.expires_at === 'number' ? data.expires_at : undefined
  };
}

export function controlOf(mode: AskMode): Control {
  return CONTROL[mode];
}

/** The "other" free-text field: only choice modes with `allow_custom` (text modes are free). */
export function showsCustomField(req: InputRequest): boolean {
  return CHOICE_MODES.has(req.mode) && req.allow_custom === true;
}

export function submitLabelOf(req: InputRequest, fallback: string): string {
  return req.submit_label && req.submit_label.trim() ? req.submit_label : fallback;
}

/** What a card shows: the form, or for `resumable: false` only the not-resumable notice. */
export function cardKind(req: InputRequest): 'form' | 'not_resumable' {
  return req.resumable === false ? 'not_resumable' : 'form';
}

/** Selections after the learner clicks an option: `single` keeps only one. */
export function toggleSelection(
  req: InputRequest,
  selections: readonly string[],
  id: string,
  checked: boolean
): string[] {
  if (req.mode === 'single') {
    return checked ? [id] : [];
  }
  const rest = selections.filter(s => s !== id);
  return checked ? [...rest, id] : rest;
}

const NUMBER = new RegExp(`^(?:${NUMBER_PATTERN})$`);
const ISO_DATE = new RegExp(`^(?:${ISO_DATE_PATTERN})$`);

/** A finite number written plainly: no `0x10`, no `1_000`, nothing `Number()` reads besides. */
export function isNumber(text: string): boolean {
  return NUMBER.test(text) && Number.isFinite(Number(text));
}

/** A real day from year 1 (Python's `date`), as YYYY-MM-DD. */
export function isIsoDate(text: string): boolean {
  if (!ISO_DATE.test(text)) {
    return false;
  }
  const [y, m, d] = text.split('-').map(Number);
  // setUTCFullYear, not Date.UTC: that one reads the years 0 to 99 as 1900 to 1999.
  const date = new Date(0);
  date.setUTCFullYear(y, m - 1, d);
  return (
    y >= 1 && date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d
  );
}

/** A relative path that never climbs above where it starts (`a/../b` does not, `a/../..` does). */
export function staysInside(path: string): boolean {
  if (path.startsWith('/')) {
    return false;
  }
  let depth = 0;
  for (const part of path.split('/')) {
    if (part === '..') {
      depth -= 1;
      if (depth < 0) {
        return false;
      }
    } else if (part && part !== '.') {
      depth += 1;
    }
  }
  return true;
}

/**
 * Why this answer cannot be sent yet, in words; null when it can. Mirrors the kernel's
 * `check_answer` (a directory is also checked there, against the notebook's folder).
 */
export function answerProblem(
  req: InputRequest,
  selections: readonly string[],
  customInput: string
): string | null {
  const ids = new Set((req.options ?? []).map(o => o.id));
  if (selections.some(s => !ids.has(s))) {
    return __('Not an option of this question.');
  }
  if (CHOICE_MODES.has(req.mode)) {
    if (customInput && !req.allow_custom) {
      return __('This question does not take a free-text answer.');
    }
    if (req.mode === 'single' && selections.length > 1) {
      return __('Choose one option.');
    }
    if ((req.mode === 'single' || req.mode === 'toggle') && !selections.length && !customInput) {
      return __('Choose at least one option.');
    }
    return null;
  }
  const text = customInput.trim();
  if (!text) {
    return __('Please type an answer.');
  }
  if (req.mode === 'number' && !isNumber(text)) {
    return __('%1 is not a number.', text);
  }
  if (req.mode === 'date' && !isIsoDate(text)) {
    return __('%1 is not a date in ISO form (YYYY-MM-DD).', text);
  }
  if (req.mode === 'directory' && !staysInside(text)) {
    return __('Give a folder inside the notebook\u2019s folder, as a relative path.');
  }
  return null;
}

/** The submission for a filled form; throws with the problem when it cannot be sent. */
export function buildSubmission(
  req: InputRequest,
  selections: readonly string[],
  customInput: string
): Submission {
  const problem = answerProblem(req, selections, customInput);
  if (problem) {
    throw new Error(problem);
  }
  const text = CHOICE_MODES.has(req.mode) ? customInput : customInput.trim();
  return { selections: [...selections], custom_input: text, cancelled: false };
}

export const CANCELLED: Submission = { selections: [], custom_input: '', cancelled: true };

/** The read-only receipt after a question is settled (answered, cancelled or expired). */
export function receiptOf(
  req: InputRequest,
  outcome: { selections?: string[]; custom_input?: string; cancelled?: boolean; reason?: string }
): string {
  if (outcome.reason === 'timeout') {
    return __('Expired: this question timed out before it was answered.');
  }
  if (outcome.cancelled) {
    return __('Cancelled: the question was not answered and the turn stopped.');
  }
  const labels = (outcome.selections ?? []).map(
    id => req.options?.find(o => o.id === id)?.label ?? id
  );
  const custom = outcome.custom_input ? [outcome.custom_input] : [];
  return __('Answered: %1', [...labels, ...custom].join(', ') || __('(empty)'));
}

/**
 * Enter in a one-line answer (text, number, date, "Other") submits it, as in any form: not
 * while an input method composes (its Enter picks a word), not with a modifier, and only when
 * the answer is complete and nothing is being sent.
 */
export function submitsOnEnter(e: KeyLike, problem: string | null, busy: boolean): boolean {
  const plain = !e.shiftKey && !e.ctrlKey && !e.metaKey;
  return e.key === 'Enter' && !e.isComposing && plain && problem === null && !busy;
}
