/**
 * The chat's compact chooser: the conversation's model and knowledge base (choice.ts). A change
 * is sent to the kernel, which checks it and answers with the choices now in force.
 */
import * as React from 'react';

import { KernelChat } from './chat';
import { hasChoices } from './choice';
import { __ } from './i18n';

export function ChoiceBar(props: { chat: KernelChat }): React.ReactElement | null {
  const { chat } = props;
  const chooser = chat.chooser;
  if (!hasChoices(chooser)) {
    return null;
  }
  const send = (model: string, kb: string) => void chat.choose(model, kb);
  return (
    <div className="jp-DeepTutorChat-choice">
      <select
        className="jp-DeepTutorChat-model"
        aria-label={__('Model for this conversation')}
        title={__('Model for this conversation')}
        value={chooser.model}
        onChange={e => send(e.target.value, chooser.kb)}
      >
        <option value="">{__('%1 (configured)', chooser.defaultModel)}</option>
        {chooser.models
          .filter(m => m !== chooser.defaultModel)
          .map(m => (
            <option key={m} value={m}>
              {m}
            </option>
          ))}
      </select>
      <select
        className="jp-DeepTutorChat-kb"
        aria-label={__('Knowledge base for this conversation')}
        title={__('Knowledge base for this conversation')}
        value={chooser.kb}
        onChange={e => send(chooser.model, e.target.value)}
      >
        <option value="">{__('No knowledge base')}</option>
        {chooser.kbs.map(kb => (
          <option key={kb} value={kb}>
            {__('Knowledge base: %1', kb)}
          </option>
        ))}
      </select>
    </div>
  );
}
