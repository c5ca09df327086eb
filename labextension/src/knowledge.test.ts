import { describe, expect, it } from 'vitest';

import {
  KB_NAME,
  KbJob,
  anyRunning,
  defaultKbName,
  diffRows,
  jobFraction,
  jobLine,
  jobStarted,
  latestJobs,
  onJobStarted,
  provenance,
  sourcesLine
} from './knowledge';

function job(over: Partial<KbJob>): KbJob {
  return {
    id: 'j1',
    name: 'week1',
    path: 'course/week1',
    state: 'running',
    done: 0,
    total: 0,
    current: '',
    summary: '',
    errors: [],
    started_at: 1,
    finished_at: null,
    ...over
  };
}

describe('defaultKbName', () => {
  it('takes the last part of the path and makes it a valid name', () => {
    expect(defaultKbName('course/Week 1: Linear algebra')).toBe('Week-1-Linear-algebra');
    expect(defaultKbName('course/week1/')).toBe('week1');
    expect(defaultKbName('notes/rank.md')).toBe('rank');
    expect(defaultKbName('.hidden')).toBe('hidden');
    expect(defaultKbName('线性代数')).toBe('');
    expect(defaultKbName('x'.repeat(80))).toHaveLength(64);
  });

  it('gives names the server accepts', () => {
    for (const path of ['a b/c d', 'week_1-2', 'über/Straße.pdf', 'a..b']) {
      const name = defaultKbName(path);
      expect(name === '' || KB_NAME.test(name)).toBe(true);
    }
  });
});

describe('job progress', () => {
  it('is unknown before the indexer has counted the work', () => {
    expect(jobFraction(job({}))).toBeNull();
    expect(jobLine(job({}))).toBe('Indexing course/week1: looking for files…');
  });

  it('says how far it is and which file it reads', () => {
    const running = job({ done: 1, total: 3, current: 'course/week1/rank.md' });
    expect(jobFraction(running)).toBeCloseTo(1 / 3);
    expect(jobLine(running)).toBe('Indexing course/week1: 33% (course/week1/rank.md)');
  });

  it('says what was indexed, or why it failed', () => {
    expect(jobLine(job({ state: 'done', summary: '2 added, 2 chunks' }))).toBe(
      'Indexed course/week1: 2 added, 2 chunks'
    );
    expect(jobLine(job({ state: 'failed', errors: ['OSError: disk full'] }))).toBe(
      'Indexing course/week1 failed: OSError: disk full'
    );
    expect(jobFraction(job({ state: 'failed' }))).toBe(1);
  });

  it('keeps the newest job of each knowledge base and knows when to poll', () => {
    const old = job({ id: 'a', state: 'failed', started_at: 1 });
    const fresh = job({ id: 'b', started_at: 2 });
    const other = job({ id: 'c', name: 'other', state: 'done', started_at: 3 });
    expect(latestJobs([fresh, other, old]).map(j => j.id)).toEqual(['b', 'c']);
    expect(anyRunning([old, other])).toBe(false);
    expect(anyRunning([old, fresh])).toBe(true);
  });

  it('tells listeners when a job starts elsewhere, until they leave', () => {
    let calls = 0;
    const leave = onJobStarted(() => (calls += 1));
    jobStarted();
    leave();
    jobStarted();
    expect(calls).toBe(1);
  });
});

describe('diffRows', () => {
  it('keeps added, removed and context lines, and a document line of dashes', () => {
    const diff = [
      '--- a/L3/profile.md',
      '+++ b/L3/profile.md',
      '@@ -1,3 +1,3 @@',
      ' ## Style',
      '-- Prefers short answers. [^1] <!--m_b-->',
      '+- Wants proofs step by step. [^2] <!--m_c-->',
      '----',
      ''
    ].join('\n');
    expect(diffRows(diff)).toEqual([
      { kind: 'same', text: '## Style' },
      { kind: 'remove', text: '- Prefers short answers. [^1] <!--m_b-->' },
      { kind: 'add', text: '- Wants proofs step by step. [^2] <!--m_c-->' },
      { kind: 'remove', text: '---' }
    ]);
  });
});

describe('sourcesLine', () => {
  it('shows the sources relative to the root when they are under it', () => {
    const root = '/home/me/course';
    expect(sourcesLine(root, ['/home/me/course/week1', '/srv/shared/notes.md'])).toBe(
      'from week1, /srv/shared/notes.md'
    );
    expect(sourcesLine(`${root}/`, [root])).toBe('from .');
    expect(sourcesLine('/home/me/course', ['/home/me/course2/a.md'])).toBe(
      'from /home/me/course2/a.md'
    );
    expect(sourcesLine(null, [])).toBe('');
    expect(sourcesLine(root, undefined)).toBe('');
  });
});

describe('provenance', () => {
  const questions = new Map([
    ['t_1', 'What is   rank?'],
    ['t_2', 'x'.repeat(100)]
  ]);

  it('quotes the questions of the cited turns, ids where they are unknown', () => {
    expect(provenance(['t_1', 't_9'], questions)).toBe('from “What is rank?”, t_9');
  });

  it('cuts a long question', () => {
    const line = provenance(['t_2'], questions);
    expect(line).toBe(`from “${'x'.repeat(59)}…”`);
  });

  it('says when an entry was written by hand', () => {
    expect(provenance([], questions)).toBe('written by hand (no trace)');
  });
});
