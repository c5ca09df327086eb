/**
 * The ask_user card in React. The rules live in askuser.ts; this file only renders them and
 * hands the submission to whoever owns the question (the kernel comm or the server API).
 */
import * as React from 'react';

import {
  CANCELLED,
  answerProblem,
  buildSubmission,
  cardKind,
  controlOf,
  receiptOf,
  showsCustomField,
  submitLabelOf,
  submitsOnEnter,
  toggleSelection
} from './askuser';
import { InputRequest, Submission } from './protocol';
import { __ } from './i18n';
import { UserInputResolved } from './schema';
import { reasonText } from './errors';

/** How a question was settled: the fields of its `user_input_resolved` event. */
export type Settled = Pick<
  UserInputResolved,
  'selections' | 'custom_input' | 'cancelled' | 'reason'
>;

export interface AskUserCardProps {
  request: InputRequest;
  /** Resolves when the answer was taken; rejects with the refusal in words. */
  onSubmit: (answer: Submission) => Promise<void>;
  /** Set once the question is settled: the card becomes a read-only receipt. */
  settled?: Settled | null;
  /** Where the question waits (the pending tab names the notebook). */
  where?: string;
  /** Said on the receipt: the turn goes on in this notebook's cell. */
  continuesIn?: string;
  /** How the title, question and options are shown (the panel renders Markdown and LaTeX, as
   * for answers); plain text by default. */
  renderText?: (text: string) => React.ReactNode;
}

const NOT_RESUMABLE = (): string =>
  __(
    'The kernel that asked this has restarted and the question can no longer continue. Start the task again.'
  );

const TEXT_HINT = (): Record<string, string> => ({
  text: __('Your answer'),
  number: __('A number'),
  date: __('YYYY-MM-DD'),
  directory: __('A folder, relative to the notebook (e.g. data/raw)')
});

export function AskUserCard(props: AskUserCardProps): React.ReactElement {
  const { request } = props;
  const [selections, setSelections] = React.useState<string[]>([]);
  const [customInput, setCustomInput] = React.useState('');
  const [error, setError] = React.useState<string | null>(null);
  const [busy, setBusy] = React.useState(false);
  const [local, setLocal] = React.useState<Settled | null>(null);
  const settled = props.settled ?? local;
  const render = props.renderText ?? ((text: string) => text);

  const send = async (answer: Submission) => {
    setBusy(true);
    setError(null);
    try {
      await props.onSubmit(answer);
      setLocal(answer);
    } catch (reason) {
      setError(reasonText(reason));
    } finally {
      setBusy(false);
    }
  };

  const header = (
    <div className="jp-DeepTutorAsk-head">
      <div className="jp-DeepTutorAsk-title">{render(request.title)}</div>
      {props.where ? <div className="jp-DeepTutorAsk-where">{props.where}</div> : null}
      {request.description ? (
        <div className="jp-DeepTutorAsk-description">{render(request.description)}</div>
      ) : null}
    </div>
  );

  if (cardKind(request) === 'not_resumable') {
    return (
      <div className="jp-DeepTutorAsk jp-mod-notResumable">
        {header}
        <div className="jp-DeepTutorAsk-notice">{NOT_RESUMABLE()}</div>
      </div>
    );
  }
  if (settled) {
    return (
      <div className="jp-DeepTutorAsk jp-mod-settled">
        {header}
        <div className="jp-DeepTutorAsk-receipt">{receiptOf(request, settled)}</div>
        {props.continuesIn && !settled.cancelled ? (
          <div className="jp-DeepTutorAsk-where">
            {__('The turn continues in %1.', props.continuesIn)}
          </div>
        ) : null}
      </div>
    );
  }

  const control = controlOf(request.mode);
  const choice = control === 'radio' || control === 'checkbox' || control === 'toggle';
  const problem = answerProblem(request, selections, customInput);
  const submit = () => {
    try {
      void send(buildSubmission(request, selections, customInput));
    } catch (reason) {
      setError(reasonText(reason));
    }
  };
  const onEnter = (e: React.KeyboardEvent<HTMLInputElement>) => {
    const key = {
      key: e.key,
      shiftKey: e.shiftKey,
      ctrlKey: e.ctrlKey,
      metaKey: e.metaKey,
      isComposing: e.nativeEvent.isComposing
    };
    if (submitsOnEnter(key, problem, busy)) {
      e.preventDefault();
      submit();
    }
  };

  return (
    <div className={`jp-DeepTutorAsk jp-mod-${request.mode}`}>
      {header}
      {choice ? (
        <div
          className="jp-DeepTutorAsk-options"
          role={control === 'radio' ? 'radiogroup' : 'group'}
        >
          {(request.options ?? []).map(option => {
            const checked = selections.includes(option.id);
            return (
              <label
                key={option.id}
                className={`jp-DeepTutorAsk-option${checked ? ' jp-mod-checked' : ''}`}
              >
                <input
                  type={control === 'radio' ? 'radio' : 'checkbox'}
                  name={`ask-${request.id}`}
                  value={option.id}
                  checked={checked}
                  disabled={busy}
                  onChange={e =>
                    setSelections(toggleSelection(request, selections, option.id, e.target.checked))
                  }
                />
                <span className="jp-DeepTutorAsk-label">{render(option.label)}</span>
                {option.recommended ? (
                  <span className="jp-DeepTutorAsk-recommended">{__('recommended')}</span>
                ) : null}
                {option.description ? (
                  <span className="jp-DeepTutorAsk-optionDescription">
                    {render(option.description)}
                  </span>
                ) : null}
              </label>
            );
          })}
        </div>
      ) : (
        <input
          className="jp-DeepTutorAsk-input jp-mod-styled"
          type={control === 'number' ? 'number' : control === 'date' ? 'date' : 'text'}
          placeholder={TEXT_HINT()[control] ?? ''}
          value={customInput}
          disabled={busy}
          onChange={e => setCustomInput(e.target.value)}
          onKeyDown={onEnter}
        />
      )}
      {showsCustomField(request) ? (
        <input
          className="jp-DeepTutorAsk-input jp-DeepTutorAsk-other jp-mod-styled"
          type="text"
          placeholder={__('Other (your own answer)')}
          value={customInput}
          disabled={busy}
          onChange={e => setCustomInput(e.target.value)}
          onKeyDown={onEnter}
        />
      ) : null}
      {error ? <div className="jp-DeepTutorAsk-error">{error}</div> : null}
      <div className="jp-DeepTutorAsk-buttons">
        <button
          className="jp-Button jp-mod-styled jp-mod-accept"
          disabled={busy || problem !== null}
          title={problem ?? ''}
          onClick={submit}
        >
          {submitLabelOf(request, __('Submit'))}
        </button>
        <button
          className="jp-Button jp-mod-styled jp-mod-reject"
          disabled={busy}
          onClick={() => void send(CANCELLED)}
        >
          {__('Cancel')}
        </button>
      </div>
    </div>
  );
}
