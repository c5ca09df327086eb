/**
 * The panel's answer rules against the cases the kernel's rules are tested with
 * (answer_cases.json; tests/contracts/test_answer_cases.py runs the same file through
 * interaction/answers.py and the cell's card). A rule changed on one side only fails one of them.
 */
import { describe, expect, it } from 'vitest';

import { answerProblem, toInputRequest } from './askuser';
import cases from './answer_cases.json';
import { AskMode, InputRequest } from './protocol';

function request(mode: AskMode): InputRequest {
  const req = toInputRequest({ id: 'ask_1', tool_call_id: 'call_1', title: '?', mode });
  if (!req) {
    throw new Error(`not a request: ${mode}`);
  }
  return req;
}

describe('the answer rules shared with the kernel', () => {
  it('has cases for the drifts it was written for', () => {
    const inputs = cases.cases.map(c => `${c.mode}:${c.input}`);
    expect(inputs).toEqual(
      expect.arrayContaining(['number:0x10', 'number:1_000', 'date:0099-12-31'])
    );
  });

  for (const c of cases.cases) {
    it(`${c.mode} ${JSON.stringify(c.input)} is ${c.ok ? 'accepted' : 'refused'}`, () => {
      const problem = answerProblem(request(c.mode as AskMode), [], c.input);
      expect(problem === null).toBe(c.ok);
    });
  }
});
