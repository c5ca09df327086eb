/**
 * Regenerate in the panel's chat, as pure rules over its turns (KernelChat folds events with
 * `foldEvent`; the panel asks `regenerable` where to put the button). The kernel end is
 * deeptutor_jupyter/runtime/session_edits.py: a regenerated turn's `turn_started` names the
 * turn it `replaces`, and the new turn takes that turn's place in the list.
 */
import { ChatTurn, applyEvent, newTurn } from './chatmodel';
import { TurnEvent } from './protocol';

/** The turns after one event; the same array when it changed nothing (seen already). A
 * regenerated turn's `turn_started` puts it where the turn it replaces was. */
export function foldEvent(turns: readonly ChatTurn[], event: TurnEvent): readonly ChatTurn[] {
  const replaces = event.type === 'turn_started' ? event.replaces : null;
  const old = replaces ? turns.findIndex(t => t.turnId === replaces) : -1;
  const index = turns.findIndex(t => t.turnId === event.turn_id);
  // The learner's words stay on the bubble; the event's question is what the model was sent.
  const base =
    index >= 0 ? turns[index] : newTurn(event.turn_id, old >= 0 ? turns[old].question : '');
  const next = applyEvent(base, event);
  if (next === base && index >= 0) {
    return turns;
  }
  if (old >= 0) {
    return turns
      .filter(t => t.turnId !== event.turn_id)
      .map(t => (t.turnId === replaces ? next : t));
  }
  return index >= 0 ? turns.map((t, i) => (i === index ? next : t)) : [...turns, next];
}

/** The id of the answer that can be regenerated: the last one, once nothing runs or waits. */
export function regenerable(turns: readonly ChatTurn[]): string | null {
  const last = turns[turns.length - 1];
  if (!last || turns.some(t => t.status === 'running' || t.status === 'waiting')) {
    return null;
  }
  return last.turnId;
}
