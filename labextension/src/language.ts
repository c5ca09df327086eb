/**
 * A notebook does not open as modified just because the kernel runs another Python version
 * than the one recorded in the file.
 *
 * When a kernel is ready JupyterLab writes the kernel's `language_info` into the notebook's
 * metadata. If the file was saved under Python 3.11.7 and the kernel runs 3.12.1, the only
 * difference is `language_info.version`, and yet the notebook shows as modified the moment it
 * opens (a student's quickstart, a teacher's handout). That one change is not the learner's:
 * when it is the only change since the file was loaded, the notebook stays clean. The file
 * keeps its recorded version until the learner saves for a reason of their own; then the
 * kernel's version is written, as JupyterLab always does.
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

type Json = unknown;

function sameJson(a: Json, b: Json): boolean {
  if (a === b) {
    return true;
  }
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return false;
  }
  if (Array.isArray(a) !== Array.isArray(b)) {
    return false;
  }
  const left = a as Record<string, Json>;
  const right = b as Record<string, Json>;
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) {
    return false;
  }
  return keys.every(key => key in right && sameJson(left[key], right[key]));
}

function withoutVersion(value: Json): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return value;
  }
  const rest: Record<string, Json> = { ...(value as Record<string, Json>) };
  delete rest.version;
  return rest;
}

/** True when two `language_info` values differ in their `version` only (same language). */
export function onlyVersionDiffers(before: Json, after: Json): boolean {
  if (typeof before !== 'object' || before === null) {
    return false; // no language recorded: the kernel's is new information
  }
  return !sameJson(before, after) && sameJson(withoutVersion(before), withoutVersion(after));
}

/** Keep one notebook clean across the kernel's version update. */
export function keepCleanOnVersion(panel: NotebookPanel): void {
  void panel.context.ready.then(() => {
    const model = panel.model;
    if (model === null) {
      return;
    }
    model.metadataChanged.connect((_sender, change) => {
      if (change.key !== 'language_info' || change.type !== 'change') {
        return;
      }
      // The signal comes before the shared model marks itself dirty for this change.
      const wasClean = !model.dirty;
      if (wasClean && onlyVersionDiffers(change.oldValue, change.newValue)) {
        void Promise.resolve().then(() => {
          model.dirty = false;
        });
      }
    });
  });
}

export function keepNotebooksCleanOnVersion(notebooks: INotebookTracker): void {
  notebooks.widgetAdded.connect((_, panel) => keepCleanOnVersion(panel));
}
