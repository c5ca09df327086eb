/** What a rejected promise says, in words for the learner: an Error's message, else the value. */
export function reasonText(reason: unknown): string {
  return reason instanceof Error ? reason.message : String(reason);
}
