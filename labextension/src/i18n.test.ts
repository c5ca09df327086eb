import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DOMAIN, __, useBundle } from './i18n';
import { receiptOf } from './askuser';
import { sendHint } from './settings';

describe('__', () => {
  afterEach(() => useBundle(null));

  it('formats English with numbered placeholders', () => {
    expect(__('continues in %1, cell [%2]', 'a.ipynb', 3)).toBe('continues in a.ipynb, cell [3]');
    expect(__('100%1 done %3', 'x')).toBe('100x done %3');
  });

  it('uses the installed bundle', () => {
    useBundle({ __: (m: string) => `<${m}>` });
    expect(__('Stop')).toBe('<Stop>');
  });
});

/** The shipped zh_CN catalog, as the Jupyter server serves it under the panel's domain. */
function shippedCatalog(): Record<string, unknown> {
  const path = fileURLToPath(
    new URL(`../../deeptutor_jupyter/locale/zh_CN/LC_MESSAGES/${DOMAIN}.json`, import.meta.url)
  );
  return JSON.parse(readFileSync(path, 'utf-8'));
}

describe('the zh_CN catalog through JupyterLab’s TranslationManager', () => {
  let TranslationManager: typeof import('@jupyterlab/translation').TranslationManager;
  beforeAll(async () => {
    ({ TranslationManager } = await import('@jupyterlab/translation'));
    // Gettext reads the page's language when it is built; node has no page.
    (globalThis as Record<string, unknown>).document ??= {
      documentElement: { getAttribute: () => null }
    };
  });
  afterEach(() => useBundle(null));

  async function chineseBundle(domains: Record<string, unknown>) {
    const connector = {
      fetch: async () => ({ data: domains, message: '' }),
      list: async () => ({ ids: [], values: [] }),
      save: async () => undefined,
      remove: async () => undefined
    };
    const manager = new TranslationManager('', undefined, undefined, connector as never);
    await manager.fetch('zh_CN');
    return manager.load(DOMAIN);
  }

  it('puts the panel in Chinese, placeholders included', async () => {
    useBundle(await chineseBundle({ [DOMAIN]: shippedCatalog() }));
    expect(__('Chat')).toBe('对话');
    expect(__('Stop')).toBe('停止');
    expect(__('Notebook: %1', 'week3.ipynb')).toBe('笔记本：week3.ipynb');
    expect(sendHint('Enter')).toBe('向导师提问（Enter 发送，Shift+Enter 换行）');
    expect(
      receiptOf(
        { id: 'a', tool_call_id: 'c', title: 't', mode: 'text' },
        {
          custom_input: '42'
        }
      )
    ).toBe('已回答：42');
  });

  it('keeps English for a text the catalog lacks, and everywhere without the domain', async () => {
    useBundle(await chineseBundle({ [DOMAIN]: shippedCatalog() }));
    expect(__('Not in the catalog %1', 'x')).toBe('Not in the catalog x');
    useBundle(
      await chineseBundle({
        jupyterlab: { '': { language: 'zh-CN', plural_forms: 'nplurals=1; plural=0;' } }
      })
    );
    expect(__('Chat')).toBe('Chat');
  });
});
