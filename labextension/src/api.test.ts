import { describe, expect, it } from 'vitest';
import { reportLanguage } from './api';

describe('reportLanguage', () => {
  it("puts JupyterLab's language code to the server's language route", async () => {
    const sent: [string, RequestInit][] = [];
    await reportLanguage('zh-CN', async (path, init) => sent.push([path, init]));
    expect(sent).toEqual([['language', { method: 'PUT', body: '{"language":"zh-CN"}' }]]);
  });

  it('sends nothing without a code', async () => {
    const sent: string[] = [];
    await reportLanguage('', async path => sent.push(path));
    expect(sent).toEqual([]);
  });
});
