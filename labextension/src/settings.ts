/**
 * The learner's settings of the Tutor panel (schema/plugin.json, edited in JupyterLab's settings
 * editor). Pure functions, so the rules are tested without JupyterLab; index.ts applies them.
 */
import { __ } from './i18n';

export type Tab = 'chat' | 'pending' | 'memory' | 'knowledge' | 'progress';
export type SendKey = 'Shift Enter' | 'Enter' | 'Ctrl Enter';

export interface PanelSettings {
  /** The tab the panel shows first; changing the setting switches the open panel to it. */
  openTab: Tab;
  /** Talk to the notebook in focus (true), or stay with one until it closes (false). */
  followNotebook: boolean;
  /** The key that sends the chat box's question. */
  sendKey: SendKey;
}

export const TABS: readonly Tab[] = ['chat', 'pending', 'memory', 'knowledge', 'progress'];
export const SEND_KEYS: readonly SendKey[] = ['Shift Enter', 'Enter', 'Ctrl Enter'];

export const DEFAULTS: PanelSettings = {
  openTab: 'chat',
  followNotebook: true,
  sendKey: 'Shift Enter'
};

function oneOf<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  return typeof value === 'string' && (allowed as readonly string[]).includes(value)
    ? (value as T)
    : fallback;
}

/** The settings from the registry's composite; a value the schema would refuse reads as default. */
export function readSettings(composite: Record<string, unknown>): PanelSettings {
  return {
    openTab: oneOf(composite.openTab, TABS, DEFAULTS.openTab),
    followNotebook:
      typeof composite.followNotebook === 'boolean'
        ? composite.followNotebook
        : DEFAULTS.followNotebook,
    sendKey: oneOf(composite.sendKey, SEND_KEYS, DEFAULTS.sendKey)
  };
}

/** What onKeyDown needs of a keyboard event. */
export interface KeyLike {
  key: string;
  shiftKey: boolean;
  ctrlKey: boolean;
  metaKey: boolean;
  /** True while an input method (pinyin...) is composing: its Enter picks a word, never sends. */
  isComposing?: boolean;
}

/** Whether this key press sends the question under the learner's `sendKey`. */
export function sendsQuestion(sendKey: SendKey, e: KeyLike): boolean {
  if (e.key !== 'Enter' || e.isComposing) {
    return false;
  }
  switch (sendKey) {
    case 'Shift Enter':
      return e.shiftKey && !e.ctrlKey && !e.metaKey;
    case 'Enter':
      return !e.shiftKey && !e.ctrlKey && !e.metaKey;
    case 'Ctrl Enter':
      return (e.ctrlKey || e.metaKey) && !e.shiftKey;
  }
}

/** The chat box's placeholder: how to send under the learner's `sendKey`. */
export function sendHint(sendKey: SendKey): string {
  switch (sendKey) {
    case 'Shift Enter':
      return __('Ask the tutor (Shift+Enter to send)');
    case 'Enter':
      return __('Ask the tutor (Enter to send, Shift+Enter for a new line)');
    case 'Ctrl Enter':
      return __('Ask the tutor (Ctrl+Enter to send)');
  }
}

type Json = Record<string, unknown>;

function isJson(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The plugin's schema with its titles and descriptions in the learner's language, for the
 * settings editor. JupyterLab's server translates schemas only from a language pack's own
 * catalogs, so the panel's catalog (the same `__` bundle) is applied here, when the registry
 * fetches the plugin (`jupyter.lab.transform` in the schema).
 */
export function translateSchema<T extends Json>(schema: T): T {
  const copy: Json = { ...schema };
  for (const key of ['title', 'description']) {
    if (typeof copy[key] === 'string') {
      // i18n-dynamic: the schema's texts are in the catalog too (scripts/i18n_catalog.py).
      copy[key] = __(copy[key] as string);
    }
  }
  if (isJson(copy.properties)) {
    const properties: Json = {};
    for (const [name, property] of Object.entries(copy.properties)) {
      properties[name] = isJson(property) ? translateSchema(property) : property;
    }
    copy.properties = properties;
  }
  if (Array.isArray(copy.oneOf)) {
    copy.oneOf = copy.oneOf.map(item => (isJson(item) ? translateSchema(item) : item));
  }
  return copy as T;
}
