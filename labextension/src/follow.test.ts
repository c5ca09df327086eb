import { describe, expect, it } from 'vitest';
import { follow, nearBottom } from './follow';

describe('following the newest answer', () => {
  it('follows from the bottom and stays put once the learner scrolled up', () => {
    const box = { scrollTop: 600, scrollHeight: 1000, clientHeight: 400 };
    expect(nearBottom(box)).toBe(true);
    box.scrollHeight = 1300; // a new answer grew the list
    follow(box, nearBottom({ ...box, scrollHeight: 1000 }));
    expect(box.scrollTop).toBe(1300);
    box.scrollTop = 200; // the learner scrolls up to read
    expect(nearBottom(box)).toBe(false);
    box.scrollHeight = 1600;
    follow(box, false);
    expect(box.scrollTop).toBe(200);
  });
});
