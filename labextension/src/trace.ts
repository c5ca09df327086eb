/**
 * The MIME renderer of `application/vnd.deeptutor.trace+json`: a saved turn (memory/trace.py
 * `TraceRecord`) as a compact card (question, answer summary, tools, the learner's choices).
 * Plain DOM and text only (never HTML from the record), so it is safe in an untrusted notebook
 * and needs no kernel.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { TRACE_MIME, TraceRecord } from './protocol';
import { DOMAIN, __, useBundle } from './i18n';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The record, or the reason it cannot be shown. */
export function toTrace(data: unknown): TraceRecord | string {
  if (!isRecord(data)) {
    return __('This DeepTutor trace is not a JSON object.');
  }
  if (typeof data.question !== 'string' || typeof data.answer_summary !== 'string') {
    return __('This DeepTutor trace has no question or answer summary.');
  }
  return data as unknown as TraceRecord;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function when(seconds: number | undefined): string {
  if (typeof seconds !== 'number') {
    return '';
  }
  return new Date(seconds * 1000).toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
}

/** The learner's choices in one line each: option ids only (free text never enters a trace). */
export function choicesOf(trace: TraceRecord): string[] {
  return (trace.ask_user ?? []).map(item =>
    item.cancelled ? __('cancelled') : (item.selections ?? []).join(', ') || __('(free text)')
  );
}

/** A turn's status in the learner's words (the record keeps the runtime's word). */
function statusOf(status: string | undefined): string {
  switch (status) {
    case 'done':
      return __('Done');
    case 'cancelled':
      return __('Stopped');
    case 'error':
      return __('Failed');
    default:
      return status ?? '';
  }
}

export function renderTrace(node: HTMLElement, trace: TraceRecord): void {
  node.replaceChildren();
  const head = el('div', 'jp-DeepTutorTrace-head');
  head.append(el('span', 'jp-DeepTutorTrace-badge', 'DeepTutor'));
  const meta = [trace.model, statusOf(trace.status), when(trace.started_at)]
    .filter(Boolean)
    .join(' · ');
  head.append(el('span', 'jp-DeepTutorTrace-meta', meta));
  node.append(head);
  const rows: [string, string][] = [
    [__('Question'), trace.question],
    [__('Answer'), trace.answer_summary || __('(no answer)')]
  ];
  if (trace.tools && trace.tools.length) {
    rows.push([__('Tools'), trace.tools.join(', ')]);
  }
  const choices = choicesOf(trace);
  if (choices.length) {
    rows.push([__('Your choices'), choices.join('; ')]);
  }
  const table = el('dl', 'jp-DeepTutorTrace-rows');
  for (const [label, value] of rows) {
    table.append(el('dt', 'jp-DeepTutorTrace-label', label));
    table.append(el('dd', 'jp-DeepTutorTrace-value', value));
  }
  node.append(table);
}

export class TraceRenderer extends Widget implements IRenderMime.IRenderer {
  constructor() {
    super();
    this.addClass('jp-DeepTutorTrace');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const trace = toTrace(model.data[TRACE_MIME]);
    if (typeof trace === 'string') {
      this.node.replaceChildren(el('div', 'jp-DeepTutorTrace-problem', trace));
    } else {
      renderTrace(this.node, trace);
    }
    return Promise.resolve();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [TRACE_MIME],
  createRenderer: options => {
    // A notebook opened before the panel's plugin ran still shows the card in the learner's words.
    if (options.translator) {
      useBundle(options.translator.load(DOMAIN));
    }
    return new TraceRenderer();
  }
};
