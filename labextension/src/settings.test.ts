import { afterEach, describe, expect, it } from 'vitest';
import { useBundle } from './i18n';
import { DEFAULTS, readSettings, sendHint, sendsQuestion, translateSchema } from './settings';
import schema from '../schema/plugin.json';

const key = (
  k: string,
  mods: Partial<Record<'shiftKey' | 'ctrlKey' | 'metaKey', boolean>> = {}
) => ({
  key: k,
  shiftKey: false,
  ctrlKey: false,
  metaKey: false,
  ...mods
});

describe('readSettings', () => {
  it('takes the values the schema allows', () => {
    expect(readSettings({ openTab: 'memory', followNotebook: false, sendKey: 'Enter' })).toEqual({
      openTab: 'memory',
      followNotebook: false,
      sendKey: 'Enter'
    });
  });

  it('reads a value the schema would refuse as its default, key by key', () => {
    expect(readSettings({ openTab: 'quiz', followNotebook: 'no', sendKey: 'Alt Enter' })).toEqual(
      DEFAULTS
    );
    expect(readSettings({ openTab: 'pending' }).openTab).toBe('pending');
    expect(readSettings({}).sendKey).toBe('Shift Enter');
  });

  it('has the schema defaults', () => {
    const props = schema.properties;
    expect(DEFAULTS).toEqual({
      openTab: props.openTab.default,
      followNotebook: props.followNotebook.default,
      sendKey: props.sendKey.default
    });
    expect(props.openTab.oneOf.map(o => o.const)).toEqual([
      'chat',
      'pending',
      'memory',
      'knowledge',
      'progress'
    ]);
    expect(props.sendKey.oneOf.map(o => o.const)).toEqual(['Shift Enter', 'Enter', 'Ctrl Enter']);
  });
});

describe('sendsQuestion', () => {
  it('Shift+Enter sends by default; Enter alone is a new line', () => {
    expect(sendsQuestion('Shift Enter', key('Enter', { shiftKey: true }))).toBe(true);
    expect(sendsQuestion('Shift Enter', key('Enter'))).toBe(false);
    expect(sendsQuestion('Shift Enter', key('a', { shiftKey: true }))).toBe(false);
  });

  it('Enter sends and Shift+Enter is a new line when the learner chose Enter', () => {
    expect(sendsQuestion('Enter', key('Enter'))).toBe(true);
    expect(sendsQuestion('Enter', key('Enter', { shiftKey: true }))).toBe(false);
  });

  it('Ctrl+Enter or Cmd+Enter sends when chosen', () => {
    expect(sendsQuestion('Ctrl Enter', key('Enter', { ctrlKey: true }))).toBe(true);
    expect(sendsQuestion('Ctrl Enter', key('Enter', { metaKey: true }))).toBe(true);
    expect(sendsQuestion('Ctrl Enter', key('Enter'))).toBe(false);
    expect(sendsQuestion('Ctrl Enter', key('Enter', { shiftKey: true }))).toBe(false);
  });

  it('never sends on the Enter that picks a word in an input method', () => {
    expect(sendsQuestion('Enter', { ...key('Enter'), isComposing: true })).toBe(false);
  });

  it('the placeholder names the key that sends', () => {
    expect(sendHint('Shift Enter')).toContain('Shift+Enter to send');
    expect(sendHint('Enter')).toContain('Enter to send, Shift+Enter for a new line');
    expect(sendHint('Ctrl Enter')).toContain('Ctrl+Enter to send');
  });
});

describe('translateSchema', () => {
  afterEach(() => useBundle(null));

  it('translates titles and descriptions of the plugin, its settings and their choices', () => {
    useBundle({ __: (m: string) => `zh:${m}` });
    const out = translateSchema(schema as unknown as Record<string, unknown>) as typeof schema;
    expect(out.title).toBe('zh:DeepTutor');
    expect(out.properties.sendKey.title).toBe('zh:Key that sends a question');
    expect(out.properties.followNotebook.description).toMatch(/^zh:The panel talks/);
    expect(out.properties.openTab.oneOf[1]).toEqual({ const: 'pending', title: 'zh:Pending' });
    // Values and defaults stay: only words change.
    expect(out.properties.sendKey.default).toBe('Shift Enter');
    expect(schema.properties.sendKey.title).toBe('Key that sends a question'); // not mutated
  });
});
