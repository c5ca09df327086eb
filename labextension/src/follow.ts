/**
 * The chat follows the newest answer while the learner is at the bottom; once they scroll up
 * to read, it stays where they are until they come back down (or ask again).
 */

/** What the rule needs of the scrolling list. */
export interface ScrollBox {
  scrollTop: number;
  scrollHeight: number;
  clientHeight: number;
}

/** Pixels from the end that still count as "at the bottom" (a line of text, rounding). */
export const NEAR_BOTTOM = 24;

export function nearBottom(box: ScrollBox): boolean {
  return box.scrollHeight - box.scrollTop - box.clientHeight <= NEAR_BOTTOM;
}

/** After a render: to the end when following, else untouched. */
export function follow(box: ScrollBox, following: boolean): void {
  if (following) {
    box.scrollTop = box.scrollHeight;
  }
}
