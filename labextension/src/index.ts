/**
 * The Tutor sidebar plugin: the panel in the right sidebar, the "Tutor: open" command (palette
 * and shortcut, schema/plugin.json), and the binding to the notebook in focus.
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';

import { TutorPanel } from './panel';

export const OPEN_COMMAND = 'deeptutor:open';

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
    const panel = new TutorPanel(rendermime);
    panel.title.icon = tutorIcon;
    panel.title.caption = 'Tutor';
    app.shell.add(panel, 'right', { rank: 600 });

    panel.setNotebook(notebooks.currentWidget);
    notebooks.currentChanged.connect((_, notebook) => panel.setNotebook(notebook));

    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Tutor: open',
      caption: 'Open the tutor beside the notebook',
      icon: tutorIcon,
      execute: () => {
        if (labShell) {
          labShell.expandRight();
        }
        app.shell.activateById(panel.id);
      }
    });
    if (palette) {
      palette.addItem({ command: OPEN_COMMAND, category: 'DeepTutor' });
    }
  }
};

export default plugin;
