/**
 * The panel's words go through `__` so that JupyterLab's translation system can replace them.
 * Until a translator is installed (`useBundle`), `__` formats the English text itself, with the
 * same `%1`, `%2` placeholders as a JupyterLab `TranslationBundle`.
 */

/** The gettext domain of the panel's catalog (deeptutor_jupyter/locale/<lang>/LC_MESSAGES/). */
export const DOMAIN = 'deeptutor_jupyter';

export interface Bundle {
  __(msgid: string, ...args: unknown[]): string;
}

function format(msgid: string, args: unknown[]): string {
  return msgid.replace(/%(\d+)/g, (whole, n: string) => {
    const i = Number(n) - 1;
    return i >= 0 && i < args.length ? String(args[i]) : whole;
  });
}

const english: Bundle = { __: (msgid, ...args) => format(msgid, args) };
let bundle: Bundle = english;

/** Use a translator's bundle from now on (the plugin calls this once at activation). */
export function useBundle(next: Bundle | null): void {
  bundle = next ?? english;
}

/** The text in the learner's language; `%1`... are replaced by `args`. */
export function __(msgid: string, ...args: unknown[]): string {
  return bundle.__(msgid, ...args);
}
