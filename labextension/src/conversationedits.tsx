/**
 * The chat's Regenerate (on the last answer) and Delete (of a conversation, after JupyterLab's
 * confirmation dialog). Both are actions of the kernel's one session (kernel/comm.py); the
 * rules of where Regenerate shows are in turnedits.ts.
 */
import * as React from 'react';

import { KernelChat } from './chat';
import { confirmDanger } from './dialogs';
import { reasonText } from './errors';
import { __ } from './i18n';
import { Conversation } from './protocol';

/** Ask the last question again; the new answer takes this one's place. */
export function RegenerateButton(props: { chat: KernelChat; turnId: string }): React.ReactElement {
  const [busy, setBusy] = React.useState(false);
  const [problem, setProblem] = React.useState('');
  const regenerate = () => {
    setBusy(true);
    setProblem('');
    props.chat.regenerate(props.turnId).then(
      () => setBusy(false),
      reason => {
        setBusy(false);
        setProblem(reasonText(reason));
      }
    );
  };
  return (
    <>
      <button
        className="jp-Button jp-mod-styled jp-DeepTutorChat-regenerate"
        title={__('Ask the same question again; the new answer replaces this one')}
        disabled={busy}
        onClick={regenerate}
      >
        {__('Regenerate')}
      </button>
      {problem ? <span className="jp-DeepTutorChat-regenerateProblem">{problem}</span> : null}
    </>
  );
}

/** Delete a conversation once the learner confirmed it in JupyterLab's dialog. */
export function DeleteConversationButton(props: {
  chat: KernelChat;
  conversation: Conversation;
}): React.ReactElement {
  const { chat, conversation } = props;
  const remove = async () => {
    const sure = await confirmDanger(
      __('Delete this conversation?'),
      __(
        '\u201c%1\u201d and its answers leave this notebook\u2019s conversations; a question still waiting in it is cancelled. What the tutor noted in your memory stays until you delete it in the Memory tab.',
        conversation.title
      ),
      __('Delete')
    );
    if (sure) {
      await chat.deleteConversation(conversation.id);
    }
  };
  return (
    <button
      className="jp-Button jp-mod-styled jp-DeepTutorChat-delete"
      title={__('Delete this conversation')}
      onClick={() => void remove()}
    >
      {__('Delete')}
    </button>
  );
}
