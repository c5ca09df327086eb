/**
 * The chooser's state (deeptutor_jupyter/kernel/choose.py): the model and knowledge base of the
 * conversation, what may be chosen, and the `choose` action a change sends. Pure functions, so
 * the panel's rules are tested without a kernel (choice.test.ts).
 */
import { ChoicesMessage, ChooseAction } from './schema';

/** What the chooser shows; null until the kernel sent its `choices` (no model configured yet). */
export interface Chooser {
  sessionId: string;
  /** The chosen model, '' for the configured one. */
  model: string;
  /** The chosen knowledge base, '' for none. */
  kb: string;
  models: readonly string[];
  defaultModel: string;
  kbs: readonly string[];
}

/** The kernel's `choices` message as the chooser's state. A chosen model or knowledge base that
 * is no longer offered still shows, so the learner sees what the next turn would refuse. */
export function chooserFrom(message: ChoicesMessage): Chooser {
  const model = message.choice.model ?? '';
  const kb = (message.choice.kbs ?? [])[0] ?? '';
  return {
    sessionId: message.session_id,
    model,
    kb,
    models: model && !message.models.includes(model) ? [...message.models, model] : message.models,
    defaultModel: message.default_model,
    kbs: kb && !message.kbs.includes(kb) ? [...message.kbs, kb] : message.kbs
  };
}

/** The action that makes `model` ('' = the configured one) and `kb` ('' = none) the choice. */
export function chooseAction(chooser: Chooser, model: string, kb: string): ChooseAction {
  // The configured model is sent as "no choice": a later change of the settings then applies.
  const chosen = model && model !== chooser.defaultModel ? model : null;
  return { action: 'choose', conversation: chooser.sessionId, model: chosen, kbs: kb ? [kb] : [] };
}

/** The chooser is worth showing when there is something to choose. */
export function hasChoices(chooser: Chooser | null): chooser is Chooser {
  return chooser !== null && (chooser.models.length > 1 || chooser.kbs.length > 0);
}

/** A turn's model and knowledge bases as its trace line shows them: "fake-big · KB linalg". */
export function turnChoiceLabel(model: string, kbs: readonly string[], kbWord: string): string {
  // The event's model is "provider/model" (a model's own name may hold "/" too).
  const name = model.slice(model.indexOf('/') + 1);
  return kbs.length ? `${name} \u00b7 ${kbWord} ${kbs.join(', ')}` : name;
}
