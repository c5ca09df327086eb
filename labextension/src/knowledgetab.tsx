/**
 * The Knowledge tab: the knowledge bases with their sizes, the indexing jobs started from the
 * file browser ("Add to knowledge base") with their progress, and Remove (confirmed).
 */
import * as React from 'react';

import { KnowledgeBaseInfo, removeKnowledgeBase } from './api';
import { KnowledgeState, fetchKnowledge } from './dataapi';
import { confirmDanger } from './dialogs';
import { __ } from './i18n';
import {
  JOB_POLL_MS,
  KbJob,
  anyRunning,
  jobFraction,
  jobLine,
  latestJobs,
  onJobStarted,
  sourcesLine
} from './knowledge';
import { reasonText } from './errors';
import { RefreshBar } from './refreshbar';

function kbMeta(kb: KnowledgeBaseInfo): string {
  return typeof kb.problem === 'string'
    ? kb.problem
    : __('%1 files, %2 chunks', String(kb.files), String(kb.chunks));
}

function JobView(props: { job: KbJob }): React.ReactElement {
  const { job } = props;
  const fraction = jobFraction(job);
  return (
    <div className={`jp-DeepTutorKnowledge-job jp-mod-${job.state}`}>
      {job.state === 'running' ? (
        fraction === null ? (
          <progress />
        ) : (
          <progress max={1} value={fraction} />
        )
      ) : null}
      <div className="jp-DeepTutorKnowledge-jobLine">{jobLine(job)}</div>
    </div>
  );
}

export function KnowledgeTab(): React.ReactElement {
  const [state, setState] = React.useState<KnowledgeState | null>(null);
  const [error, setError] = React.useState('');
  const load = React.useCallback(() => {
    fetchKnowledge().then(
      found => {
        setState(found);
        setError('');
      },
      reason => setError(reasonText(reason))
    );
  }, []);
  React.useEffect(() => {
    load();
    return onJobStarted(load);
  }, [load]);
  // One read every JOB_POLL_MS while something is indexing, none otherwise: the indexer's
  // own pace never reaches the page.
  const running = state !== null && anyRunning(state.jobs);
  React.useEffect(() => {
    if (!running) {
      return;
    }
    const timer = setInterval(load, JOB_POLL_MS);
    return () => clearInterval(timer);
  }, [running, load]);

  const remove = async (name: string) => {
    const sure = await confirmDanger(
      __('Remove the knowledge base "%1"?', name),
      __('Its index is deleted; your files stay where they are.'),
      __('Remove')
    );
    if (!sure) {
      return;
    }
    try {
      const kbs = await removeKnowledgeBase(name);
      setState(before => ({ kbs, jobs: before?.jobs.filter(j => j.name !== name) ?? [] }));
      setError('');
    } catch (reason) {
      setError(reasonText(reason));
    }
  };

  const kbs = state?.kbs ?? [];
  const jobs = latestJobs(state?.jobs ?? []);
  const jobOf = new Map(jobs.map(job => [job.name, job]));
  const names = [...new Set([...kbs.map(kb => kb.name), ...jobs.map(job => job.name)])].sort();
  const byName = new Map(kbs.map(kb => [kb.name, kb]));
  return (
    <div className="jp-DeepTutorKnowledge">
      <RefreshBar onRefresh={load} error={error} />
      {state && names.length === 0 ? (
        <div className="jp-DeepTutorPanel-empty">
          {__(
            'No knowledge base yet. Right-click a folder in the file browser and choose "Add to knowledge base" (or in a notebook: %tutor kb add NAME FOLDER).'
          )}
        </div>
      ) : null}
      {names.map(name => {
        const kb = byName.get(name);
        const job = jobOf.get(name);
        const indexing = job?.state === 'running';
        return (
          <div key={name} className="jp-DeepTutorKnowledge-kb" data-kb={name}>
            <div className="jp-DeepTutorKnowledge-name">{name}</div>
            {kb && !indexing ? (
              <div className="jp-DeepTutorKnowledge-meta">{kbMeta(kb)}</div>
            ) : null}
            {kb && !indexing ? (
              <div className="jp-DeepTutorKnowledge-sources">
                {sourcesLine(kb.root, kb.sources)}
              </div>
            ) : null}
            {job ? <JobView job={job} /> : null}
            {kb && !indexing ? (
              <button
                className="jp-Button jp-mod-styled jp-mod-warn"
                onClick={() => void remove(name)}
              >
                {__('Remove')}
              </button>
            ) : null}
          </div>
        );
      })}
    </div>
  );
}
