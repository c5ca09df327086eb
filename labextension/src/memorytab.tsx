/**
 * The Memory tab: every document with its entries and the traces they come from; edit a
 * document, delete an entry or a whole document (confirmed), and consolidate through a preview
 * that Apply writes exactly (the server refuses it when the document changed meanwhile).
 */
import * as React from 'react';

import { ApiError, fetchMemory, saveMemory } from './api';
import {
  ConsolidationPreview,
  MODES,
  MemoryDocument,
  MemoryEntry,
  Mode,
  PreviewChange,
  applyPreview,
  deleteDocument,
  deleteEntry,
  discardPreview,
  fetchTraceQuestions,
  previewConsolidation
} from './dataapi';
import { askDeleteReason, confirmDanger } from './dialogs';
import { __ } from './i18n';
import { docTitle } from './memorynames';
import { diffRows, provenance } from './knowledge';
import { reasonText } from './errors';
import { RefreshBar } from './refreshbar';

function modeLabel(mode: Mode): string {
  switch (mode) {
    case 'update':
      return __('Update from new traces');
    case 'audit':
      return __('Audit against the evidence');
    case 'dedup':
      return __('Merge duplicates (model)');
    case 'merge':
      return __('Merge identical lines (no model)');
  }
}

function EntryRow(props: {
  doc: MemoryDocument;
  entry: MemoryEntry;
  questions: ReadonlyMap<string, string>;
  onChanged: (docs: MemoryDocument[]) => void;
  onProblem: (text: string) => void;
}): React.ReactElement {
  const { doc, entry } = props;
  const remove = async () => {
    const reason = await askDeleteReason(entry.text);
    if (reason === null) {
      return;
    }
    try {
      props.onChanged(await deleteEntry(doc.layer, doc.key, entry.id, reason));
    } catch (reason) {
      props.onProblem(reasonText(reason));
    }
  };
  return (
    <li className="jp-DeepTutorMemory-entry" data-entry-id={entry.id}>
      <span className="jp-DeepTutorMemory-entryText">{entry.text}</span>
      <span className="jp-DeepTutorMemory-refs" title={entry.refs.join(', ')}>
        {provenance(entry.refs, props.questions)}
      </span>
      <button
        className="jp-Button jp-mod-styled jp-mod-minimal jp-DeepTutorMemory-deleteEntry"
        title={__('Delete this entry')}
        aria-label={__('Delete this entry')}
        onClick={() => void remove()}
      >
        ✕
      </button>
    </li>
  );
}

function ChangeRow(props: {
  change: PreviewChange;
  questions: ReadonlyMap<string, string>;
}): React.ReactElement {
  const { change } = props;
  const from = change.refs.length ? provenance(change.refs, props.questions) : '';
  switch (change.kind) {
    case 'add':
      return (
        <li className="jp-DeepTutorPreview-change jp-mod-add">
          <span className="jp-DeepTutorPreview-kind">{__('New in %1:', change.section)}</span>{' '}
          {change.text} <span className="jp-DeepTutorMemory-refs">{from}</span>
        </li>
      );
    case 'edit':
      return (
        <li className="jp-DeepTutorPreview-change jp-mod-edit">
          <span className="jp-DeepTutorPreview-kind">{__('Changed:')}</span>{' '}
          <del>{change.old_text}</del> → {change.text}{' '}
          <span className="jp-DeepTutorMemory-refs">{from}</span>
        </li>
      );
    case 'delete':
      return (
        <li className="jp-DeepTutorPreview-change jp-mod-delete">
          <span className="jp-DeepTutorPreview-kind">{__('Forgotten (%1):', change.reason)}</span>{' '}
          <del>{change.text}</del>
        </li>
      );
  }
}

function PreviewView(props: {
  preview: ConsolidationPreview;
  problem: string;
  stale: boolean;
  onApply: () => void;
  onDiscard: () => void;
}): React.ReactElement {
  const { preview } = props;
  const rows = diffRows(preview.diff);
  const questions = new Map(preview.traces.map(t => [t.trace_id, t.question]));
  return (
    <div className="jp-DeepTutorPreview">
      <div className="jp-DeepTutorPreview-head">
        {__(
          'Preview (%1) of %2/%3.md. Nothing is written until you apply it.',
          modeLabel(preview.mode),
          preview.layer,
          preview.key
        )}
      </div>
      {preview.changes.length ? (
        <ul className="jp-DeepTutorPreview-changes">
          {preview.changes.map((change, i) => (
            <ChangeRow key={i} change={change} questions={questions} />
          ))}
        </ul>
      ) : (
        <div className="jp-DeepTutorPanel-empty">{__('Nothing in the document would change.')}</div>
      )}
      {preview.changed ? (
        <details className="jp-DeepTutorPreview-raw">
          <summary>{__('The Markdown, before and after')}</summary>
          <pre className="jp-DeepTutorPreview-diff">
            {rows.map((row, i) => (
              <div key={i} className={`jp-DeepTutorPreview-${row.kind}`}>
                {row.kind === 'add' ? '+ ' : row.kind === 'remove' ? '- ' : '  '}
                {row.text}
              </div>
            ))}
          </pre>
        </details>
      ) : null}
      {preview.traces.length ? (
        <div className="jp-DeepTutorPreview-traces">
          <div>{__('Drawn from these traces:')}</div>
          <ul>
            {preview.traces.map(t => (
              <li key={t.trace_id}>
                <code>{t.trace_id}</code>
                {t.question ? ` ${t.question}` : ''}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {preview.rejected.length ? (
        <div className="jp-DeepTutorPreview-rejected">
          <div>{__('Refused (not applied):')}</div>
          <ul>
            {preview.rejected.map((r, i) => (
              <li key={i}>{r.reason}</li>
            ))}
          </ul>
        </div>
      ) : null}
      {props.problem ? <div className="jp-DeepTutorChat-error">{props.problem}</div> : null}
      <div className="jp-DeepTutorAsk-buttons">
        <button
          className="jp-Button jp-mod-styled jp-mod-accept"
          disabled={!preview.has_work || props.stale}
          onClick={props.onApply}
        >
          {__('Apply')}
        </button>
        <button className="jp-Button jp-mod-styled jp-mod-reject" onClick={props.onDiscard}>
          {__('Discard')}
        </button>
      </div>
    </div>
  );
}

function MemoryDocView(props: {
  doc: MemoryDocument;
  questions: ReadonlyMap<string, string>;
  onSaved: (docs: MemoryDocument[]) => void;
  onReload: () => void;
}): React.ReactElement {
  const { doc } = props;
  const [editing, setEditing] = React.useState<string | null>(null);
  const [problem, setProblem] = React.useState('');
  const [mode, setMode] = React.useState<Mode>('update');
  const [busy, setBusy] = React.useState(false);
  const [preview, setPreview] = React.useState<ConsolidationPreview | null>(null);
  const [stale, setStale] = React.useState(false);
  const [notice, setNotice] = React.useState('');
  const file = `${doc.layer}/${doc.key}.md`;
  const name = docTitle(doc.layer, doc.key);
  const entries = doc.entries ?? [];
  const consolidable = !(doc.layer === 'L3' && doc.key === 'preferences');

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
      reason => setProblem(reasonText(reason))
    );
  };
  const consolidate = async () => {
    setBusy(true);
    setProblem('');
    setNotice('');
    try {
      setPreview(await previewConsolidation(doc.layer, doc.key, mode));
      setStale(false);
    } catch (reason) {
      setProblem(reasonText(reason));
    } finally {
      setBusy(false);
    }
  };
  const apply = async () => {
    if (!preview) {
      return;
    }
    try {
      const docs = await applyPreview(preview.id);
      setPreview(null);
      setProblem('');
      setNotice(
        preview.ops.length === 1
          ? __('Applied 1 change to %1.', name)
          : __('Applied %1 changes to %2.', preview.ops.length, name)
      );
      props.onSaved(docs);
    } catch (reason) {
      // A stale preview stays on screen (the learner sees what was not written) above the
      // document as it now is.
      setProblem(reasonText(reason));
      if (reason instanceof ApiError && reason.code === 'stale') {
        setStale(true);
        props.onReload();
      }
    }
  };
  const discard = () => {
    if (preview) {
      void discardPreview(preview.id).catch(() => undefined);
    }
    setPreview(null);
    setStale(false);
    setProblem('');
  };
  const removeDocument = async () => {
    const sure = await confirmDanger(
      __('Delete %1?', name),
      entries.length === 1
        ? __('Its entry is forgotten (it stays in the deletion log). Its traces stay.')
        : __(
            'Its %1 entries are forgotten (they stay in the deletion log). Their traces stay.',
            entries.length
          ),
      __('Delete')
    );
    if (!sure) {
      return;
    }
    try {
      props.onSaved(await deleteDocument(doc.layer, doc.key));
    } catch (reason) {
      setProblem(reasonText(reason));
    }
  };

  return (
    <details
      className="jp-DeepTutorMemory-doc"
      data-doc={file}
      open={!doc.empty || editing !== null || preview !== null}
    >
      <summary>
        {name}
        {doc.empty
          ? __(' (empty)')
          : entries.length === 1
            ? __(' (1 entry)')
            : __(' (%1 entries)', entries.length)}
      </summary>
      {editing === null ? (
        <>
          {entries.length ? (
            <ul className="jp-DeepTutorMemory-entries">
              {entries.map(entry => (
                <EntryRow
                  key={entry.id}
                  doc={doc}
                  entry={entry}
                  questions={props.questions}
                  onChanged={props.onSaved}
                  onProblem={setProblem}
                />
              ))}
            </ul>
          ) : null}
          <div className="jp-DeepTutorMemory-actions">
            <button className="jp-Button jp-mod-styled" onClick={() => setEditing(doc.text)}>
              {__('Edit')}
            </button>
            {consolidable ? (
              <>
                <select
                  className="jp-mod-styled jp-DeepTutorMemory-mode"
                  aria-label={__('Consolidation mode')}
                  value={mode}
                  onChange={e => setMode(e.target.value as Mode)}
                >
                  {MODES.map(m => (
                    <option key={m} value={m}>
                      {modeLabel(m)}
                    </option>
                  ))}
                </select>
                <button
                  className="jp-Button jp-mod-styled"
                  disabled={busy}
                  onClick={() => void consolidate()}
                >
                  {busy ? __('Consolidating…') : __('Consolidate')}
                </button>
              </>
            ) : null}
            {doc.empty ? null : (
              <button
                className="jp-Button jp-mod-styled jp-mod-warn"
                onClick={() => void removeDocument()}
              >
                {__('Delete document')}
              </button>
            )}
          </div>
          {notice ? <div className="jp-DeepTutorMemory-notice">{notice}</div> : null}
          {preview ? (
            <PreviewView
              preview={preview}
              problem={problem}
              stale={stale}
              onApply={() => void apply()}
              onDiscard={discard}
            />
          ) : problem ? (
            <div className="jp-DeepTutorChat-error">{problem}</div>
          ) : null}
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
  const [docs, setDocs] = React.useState<MemoryDocument[] | null>(null);
  const [error, setError] = React.useState('');
  const [questions, setQuestions] = React.useState<ReadonlyMap<string, string>>(new Map());
  const reload = React.useCallback(() => {
    // Provenance is quoted when the turns are known; ids are shown if this read fails.
    fetchTraceQuestions().then(setQuestions, () => undefined);
    fetchMemory().then(
      found => {
        setDocs(found);
        setError('');
      },
      reason => setError(reasonText(reason))
    );
  }, []);
  React.useEffect(reload, [reload]);
  return (
    <div className="jp-DeepTutorMemory">
      <RefreshBar onRefresh={reload} error={error} />
      {(docs ?? []).map(doc => (
        <MemoryDocView
          key={`${doc.layer}/${doc.key}`}
          doc={doc}
          questions={questions}
          onSaved={setDocs}
          onReload={reload}
        />
      ))}
    </div>
  );
}
