/**
 * Confirmations in JupyterLab's own dialogs (showDialog), for the tabs' deletions.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { DELETE_REASONS, DeleteReason } from './dataapi';
import { __ } from './i18n';

/** True when the learner chose the warning button (`action`). */
export async function confirmDanger(title: string, body: string, action: string): Promise<boolean> {
  const result = await showDialog({
    title,
    body,
    buttons: [Dialog.cancelButton({ label: __('Cancel') }), Dialog.warnButton({ label: action })]
  });
  return result.button.accept;
}

function reasonLabel(reason: DeleteReason): string {
  switch (reason) {
    case 'stale':
      return __('No longer true (stale)');
    case 'contradicted':
      return __('Wrong (contradicted)');
    case 'superseded':
      return __('Said better elsewhere (superseded)');
    case 'low-signal':
      return __('Not worth remembering (low signal)');
  }
}

/** The dialog's body: the entry, and why it goes (kept in the deletion log). */
class ReasonBody extends Widget implements Dialog.IBodyWidget<DeleteReason> {
  constructor(text: string) {
    super();
    this.addClass('jp-DeepTutorDeleteReason');
    const quote = document.createElement('blockquote');
    quote.textContent = text;
    const label = document.createElement('label');
    label.textContent = __('Why should the tutor forget it?');
    this._select = document.createElement('select');
    this._select.className = 'jp-mod-styled';
    for (const reason of DELETE_REASONS) {
      const option = document.createElement('option');
      option.value = reason;
      option.textContent = reasonLabel(reason);
      this._select.appendChild(option);
    }
    label.appendChild(this._select);
    this.node.append(quote, label);
  }

  getValue(): DeleteReason {
    return this._select.value as DeleteReason;
  }

  private _select: HTMLSelectElement;
}

/** The reason to delete an entry, or null when the learner cancelled. */
export async function askDeleteReason(text: string): Promise<DeleteReason | null> {
  const result = await showDialog({
    title: __('Delete this memory?'),
    body: new ReasonBody(text),
    buttons: [
      Dialog.cancelButton({ label: __('Cancel') }),
      Dialog.warnButton({ label: __('Delete') })
    ]
  });
  return result.button.accept ? result.value : null;
}
