/**
 * "Add to knowledge base" in the file browser's context menu: asks for a name (the folder's,
 * by default) and starts indexing on the server; the Knowledge tab shows the progress.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { InputDialog, showErrorMessage } from '@jupyterlab/apputils';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { LabIcon } from '@jupyterlab/ui-components';

import { addKnowledgeBase } from './dataapi';
import { __ } from './i18n';
import { KB_NAME, defaultKbName, jobStarted } from './knowledge';
import { reasonText } from './errors';

export const ADD_TO_KB_COMMAND = 'deeptutor:add-to-knowledge-base';

/** The one item selected in the file browser, as a path relative to the server's root. */
function selectedPath(factory: IFileBrowserFactory): string | null {
  const browser = factory.tracker.currentWidget;
  if (!browser) {
    return null;
  }
  const items = [...browser.selectedItems()];
  return items.length === 1 ? items[0].path : null;
}

/** Ask for a valid name; null when the learner cancels. */
async function askName(path: string): Promise<string | null> {
  let name = defaultKbName(path);
  for (;;) {
    const answer = await InputDialog.getText({
      title: __('Add "%1" to a knowledge base', path),
      label: __('Name of the knowledge base (letters, digits, - and _)'),
      text: name,
      okLabel: __('Add')
    });
    if (!answer.button.accept || answer.value === null) {
      return null;
    }
    name = answer.value.trim();
    if (KB_NAME.test(name)) {
      return name;
    }
    await showErrorMessage(
      __('Not a knowledge base name'),
      __('"%1" is not a name: use 1 to 64 letters, digits, "-" or "_".', name)
    );
  }
}

export function addKnowledgeCommand(
  app: JupyterFrontEnd,
  factory: IFileBrowserFactory,
  icon: LabIcon,
  showKnowledge: () => Promise<void>
): void {
  app.commands.addCommand(ADD_TO_KB_COMMAND, {
    label: __('Add to knowledge base'),
    caption: __('Index this folder or file so the tutor can cite it'),
    icon,
    isVisible: () => selectedPath(factory) !== null,
    execute: async () => {
      const path = selectedPath(factory);
      if (path === null) {
        return;
      }
      const name = await askName(path);
      if (name === null) {
        return;
      }
      try {
        await addKnowledgeBase(name, path);
      } catch (reason) {
        await showErrorMessage(__('Could not add to the knowledge base'), reasonText(reason));
        return;
      }
      await showKnowledge();
      jobStarted();
    }
  });
  app.contextMenu.addItem({
    command: ADD_TO_KB_COMMAND,
    selector: '.jp-DirListing-item[data-isdir]',
    rank: 60
  });
}
