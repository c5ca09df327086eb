/**
 * The panel's tabs that read through the server extension: Pending, Memory and Knowledge.
 */
import * as React from 'react';

import {
  ApiError,
  KnowledgeBaseInfo,
  MemoryDocument,
  answerPending,
  fetchKnowledgeBases,
  fetchMemory,
  fetchPending,
  removeKnowledgeBase,
  saveMemory
} from './api';
import { KernelChat } from './chat';
import { AskUserCard } from './form';
import { __ } from './i18n';
import { PendingQuestion, Submission } from './protocol';

function useLoad<T>(load: () => Promise<T>): [T | null, string, () => void] {
  const [value, setValue] = React.useState<T | null>(null);
  const [error, setError] = React.useState('');
  const reload = React.useCallback(() => {
    load().then(
      v => {
        setValue(v);
        setError('');
      },
      reason => setError(reason instanceof Error ? reason.message : String(reason))
    );
  }, []);
  React.useEffect(reload, [reload]);
  return [value, error, reload];
}

const PENDING_REFRESH_MS = 5000;

/** The last two parts of a notebook's path: enough to recognise it in a narrow panel. */
export function shortPath(path: string): string {
  return path.split('/').filter(Boolean).slice(-2).join('/');
}

/**
 * Every waiting question. One of the focused notebook's own conversation is answered over its
 * kernel's comm (the turn continues in its cell at once); any other through the server.
 */
export function PendingTab(props: { chat: KernelChat | null }): React.ReactElement {
  const [pending, error, reload] = useLoad(fetchPending);
  React.useEffect(() => {
    const timer = setInterval(reload, PENDING_REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);
  const { chat } = props;
  const answer = async (question: PendingQuestion, submission: Submission) => {
    if (chat && chat.notebook && chat.notebook === question.notebook) {
      await chat.answer(question.id, question.session_id, submission);
      return;
    }
    try {
      await answerPending(question, submission);
    } catch (reason) {
      if (reason instanceof ApiError && reason.code === 'not_resumable') {
        throw new Error(
          __(
            '%1 (Open %2 with its kernel running to answer it there.)',
            reason.message,
            question.notebook || __('its notebook')
          )
        );
      }
      throw reason;
    }
  };
  return (
    <div className="jp-DeepTutorPending">
      <div className="jp-DeepTutorPanel-toolbar">
        <button className="jp-Button jp-mod-styled" onClick={reload}>
          {__('Refresh')}
        </button>
      </div>
      {error ? <div className="jp-DeepTutorChat-error">{error}</div> : null}
      {pending && pending.length === 0 ? (
        <div className="jp-DeepTutorPanel-empty">{__('No question is waiting for you.')}</div>
      ) : null}
      {(pending ?? []).map(q => (
        <AskUserCard
          key={q.id}
          request={q}
          where={q.notebook ? __('in %1', shortPath(q.notebook)) : ''}
          continuesIn={shortPath(q.notebook)}
          onSubmit={submission => answer(q, submission)}
        />
      ))}
    </div>
  );
}

function MemoryDoc(props: {
  doc: MemoryDocument;
  onSaved: (docs: MemoryDocument[]) => void;
}): React.ReactElement {
  const { doc } = props;
  const [editing, setEditing] = React.useState<string | null>(null);
  const [problem, setProblem] = React.useState('');
  const save = () => {
    if (editing === null) {
      return;
    }
    saveMemory(doc.layer, doc.key, editing).then(
      docs => {
        setEditing(null);
        setProblem('');
        props.onSaved(docs);
      },
      reason => setProblem(reason instanceof Error ? reason.message : String(reason))
    );
  };
  return (
    <details className="jp-DeepTutorMemory-doc" open={!doc.empty || editing !== null}>
      <summary>
        {doc.layer}/{doc.key}.md{doc.empty ? __(' (empty)') : ''}
      </summary>
      {editing === null ? (
        <>
          {doc.empty ? null : <pre>{doc.text}</pre>}
          <button className="jp-Button jp-mod-styled" onClick={() => setEditing(doc.text)}>
            {__('Edit')}
          </button>
        </>
      ) : (
        <>
          <textarea
            className="jp-DeepTutorMemory-editor jp-mod-styled"
            value={editing}
            onChange={e => setEditing(e.target.value)}
          />
          {problem ? <div className="jp-DeepTutorChat-error">{problem}</div> : null}
          <div className="jp-DeepTutorAsk-buttons">
            <button className="jp-Button jp-mod-styled jp-mod-accept" onClick={save}>
              {__('Save')}
            </button>
            <button
              className="jp-Button jp-mod-styled jp-mod-reject"
              onClick={() => setEditing(null)}
            >
              {__('Cancel')}
            </button>
          </div>
        </>
      )}
    </details>
  );
}

export function MemoryTab(): React.ReactElement {
  const [docs, error, reload] = useLoad<MemoryDocument[]>(fetchMemory);
  const [saved, setSaved] = React.useState<MemoryDocument[] | null>(null);
  return (
    <div className="jp-DeepTutorMemory">
      <div className="jp-DeepTutorPanel-toolbar">
        <button
          className="jp-Button jp-mod-styled"
          onClick={() => {
            setSaved(null);
            reload();
          }}
        >
          {__('Refresh')}
        </button>
      </div>
      {error ? <div className="jp-DeepTutorChat-error">{error}</div> : null}
      {(saved ?? docs ?? []).map(doc => (
        <MemoryDoc key={`${doc.layer}/${doc.key}`} doc={doc} onSaved={setSaved} />
      ))}
    </div>
  );
}

export function KnowledgeTab(): React.ReactElement {
  const [kbs, error, reload] = useLoad<KnowledgeBaseInfo[]>(fetchKnowledgeBases);
  const [after, setAfter] = React.useState<KnowledgeBaseInfo[] | null>(null);
  const [problem, setProblem] = React.useState('');
  const shown = after ?? kbs;
  const remove = (name: string) => {
    if (!window.confirm(__('Remove the knowledge base "%1"? Its source files stay.', name))) {
      return;
    }
    removeKnowledgeBase(name).then(
      left => {
        setAfter(left);
        setProblem('');
      },
      reason => setProblem(reason instanceof Error ? reason.message : String(reason))
    );
  };
  return (
    <div className="jp-DeepTutorKnowledge">
      <div className="jp-DeepTutorPanel-toolbar">
        <button
          className="jp-Button jp-mod-styled"
          onClick={() => {
            setAfter(null);
            reload();
          }}
        >
          {__('Refresh')}
        </button>
      </div>
      {error || problem ? <div className="jp-DeepTutorChat-error">{error || problem}</div> : null}
      {shown && shown.length === 0 ? (
        <div className="jp-DeepTutorPanel-empty">
          {__('No knowledge base yet. In a notebook: %tutor kb add NAME FOLDER')}
        </div>
      ) : null}
      {(shown ?? []).map(kb => (
        <div key={kb.name} className="jp-DeepTutorKnowledge-kb">
          <div className="jp-DeepTutorKnowledge-name">{kb.name}</div>
          <div className="jp-DeepTutorKnowledge-meta">
            {typeof kb.problem === 'string'
              ? kb.problem
              : __('%1 files, %2 chunks', String(kb.files), String(kb.chunks))}
          </div>
          <button className="jp-Button jp-mod-styled jp-mod-warn" onClick={() => remove(kb.name)}>
            {__('Remove')}
          </button>
        </div>
      ))}
    </div>
  );
}
