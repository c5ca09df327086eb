/**
 * The Tutor sidebar plugin: the panel in the right sidebar, the "Tutor: open" command (palette
 * and shortcut, schema/plugin.json), and the binding to the notebook in focus.
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ISessionContext, SessionContext } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';

import { CellLike, aboutCellDraft, errorOf, explainErrorQuestion } from './context';
import { TutorPanel } from './panel';
import { keepOutputsTrue } from './displays';
import { keepNotebooksCleanOnVersion } from './language';
import { __ } from './i18n';

export const OPEN_COMMAND = 'deeptutor:open';
export const ABOUT_CELL_COMMAND = 'deeptutor:ask-about-cell';
export const EXPLAIN_ERROR_COMMAND = 'deeptutor:explain-error';

const tutorIcon = new LabIcon({
  name: 'deeptutor-jupyter:tutor',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16">' +
    '<path class="jp-icon3" fill="#616161" d="M12 3 1 9l11 6 9-4.9V17h2V9L12 3zm-7 9.2v4L12 20l7-3.8v-4L12 16l-7-3.8z"/>' +
    '</svg>'
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'deeptutor-jupyter:plugin',
  description: 'The DeepTutor panel beside the notebook.',
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  optional: [ICommandPalette, ILabShell],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    rendermime: IRenderMimeRegistry,
    palette: ICommandPalette | null,
    labShell: ILabShell | null
  ) => {
    // With no notebook open, the panel offers a conversation in a kernel of its own.
    const scratch = async (): Promise<ISessionContext> => {
      const context = new SessionContext({
        sessionManager: app.serviceManager.sessions,
        specsManager: app.serviceManager.kernelspecs,
        path: 'deeptutor-scratch',
        name: __('Tutor scratch'),
        type: 'deeptutor',
        kernelPreference: { name: 'python3', shouldStart: true, canStart: true }
      });
      await context.initialize();
      return context;
    };
    const panel = new TutorPanel(rendermime, scratch);
    panel.title.icon = tutorIcon;
    panel.title.caption = __('Tutor');
    app.shell.add(panel, 'right', { rank: 600 });

    keepOutputsTrue(notebooks);
    keepNotebooksCleanOnVersion(notebooks);
    panel.setNotebook(notebooks.currentWidget);
    notebooks.currentChanged.connect((_, notebook) => panel.setNotebook(notebook));

    app.commands.addCommand(OPEN_COMMAND, {
      label: __('Tutor: open'),
      caption: __('Open the tutor beside the notebook'),
      icon: tutorIcon,
      execute: () => {
        if (labShell) {
          labShell.expandRight();
        }
        app.shell.activateById(panel.id);
      }
    });
    if (palette) {
      palette.addItem({ command: OPEN_COMMAND, category: __('DeepTutor') });
    }

    const activeCell = (): { cell: CellLike; index: number } | null => {
      const notebook = notebooks.currentWidget?.content;
      const cell = notebook?.activeCell;
      if (!notebook || !cell) {
        return null;
      }
      return { cell: cell.model.toJSON() as CellLike, index: notebook.activeCellIndex };
    };
    const open = () => app.commands.execute(OPEN_COMMAND);

    app.commands.addCommand(ABOUT_CELL_COMMAND, {
      label: __('Ask the tutor about this cell'),
      icon: tutorIcon,
      isEnabled: () => activeCell() !== null,
      execute: async () => {
        const active = activeCell();
        if (active) {
          panel.setDraft(aboutCellDraft(active.cell, active.index));
          await open();
        }
      }
    });
    app.commands.addCommand(EXPLAIN_ERROR_COMMAND, {
      label: __('Explain this error'),
      icon: tutorIcon,
      isVisible: () => {
        const active = activeCell();
        return active !== null && errorOf(active.cell) !== null;
      },
      execute: async () => {
        const active = activeCell();
        const question = active ? explainErrorQuestion(active.cell, active.index) : null;
        if (question) {
          await open();
          await panel.ask(question);
        }
      }
    });
    app.contextMenu.addItem({
      command: ABOUT_CELL_COMMAND,
      selector: '.jp-Notebook .jp-Cell',
      rank: 30
    });
    app.contextMenu.addItem({
      command: EXPLAIN_ERROR_COMMAND,
      selector: '.jp-Notebook .jp-Cell',
      rank: 31
    });
  }
};

export default plugin;
