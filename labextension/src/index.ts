/**
 * The Tutor sidebar plugin: the panel in the right sidebar, the "Tutor: open" command (palette
 * and shortcut, schema/plugin.json), and the binding to the notebook in focus.
 */
import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ISessionContext, SessionContext } from '@jupyterlab/apputils';
import { IEditorServices } from '@jupyterlab/codeeditor';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';

import {
  Attachment,
  CellLike,
  cellAttachment,
  errorOf,
  explainErrorQuestion,
  quoteAttachment
} from './context';
import { reportLanguage } from './api';
import { installAnswerHook } from './answerhook';
import { TutorPanel } from './panel';
import { watchCells } from './cells';
import { keepOutputsTrue } from './displays';
import { containFormKeys } from './keys';
import { upgradeCodeBoxes, useEditorServices } from './codeeditor';
import { keepNotebooksCleanOnVersion } from './language';
import { serveLiveCells } from './livecells';
import { addKnowledgeCommand } from './kbcommand';
import { DOMAIN, __, useBundle } from './i18n';
import { DEFAULTS, PanelSettings, readSettings, translateSchema } from './settings';

export const OPEN_COMMAND = 'deeptutor:open';
export const ABOUT_CELL_COMMAND = 'deeptutor:ask-about-cell';
export const EXPLAIN_ERROR_COMMAND = 'deeptutor:explain-error';
export const PLUGIN_ID = 'deeptutor-jupyter:plugin';

const tutorIcon = new LabIcon({
  name: 'deeptutor-jupyter:tutor',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16">' +
    '<path class="jp-icon3" fill="#616161" d="M12 3 1 9l11 6 9-4.9V17h2V9L12 3zm-7 9.2v4L12 20l7-3.8v-4L12 16l-7-3.8z"/>' +
    '</svg>'
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'The DeepTutor panel beside the notebook.',
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  optional: [
    ICommandPalette,
    ILabShell,
    ITranslator,
    ISettingRegistry,
    IFileBrowserFactory,
    IEditorServices
  ],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    rendermime: IRenderMimeRegistry,
    palette: ICommandPalette | null,
    labShell: ILabShell | null,
    translator: ITranslator | null,
    registry: ISettingRegistry | null,
    files: IFileBrowserFactory | null,
    editors: IEditorServices | null
  ) => {
    // Before any label is made: commands and tabs read the bundle when they are built.
    useBundle(translator ? translator.load(DOMAIN) : null);
    // The forms the kernel draws in cells speak JupyterLab's language too (server: language).
    if (translator) {
      reportLanguage(translator.languageCode).catch(reason =>
        console.warn("DeepTutor: JupyterLab's language was not passed on.", reason)
      );
    }
    // Keys typed in the tutor's forms never reach notebook shortcuts (keys.ts).
    containFormKeys(document);
    // Code answers, in cells and in the panel, get JupyterLab's editor (codeeditor.ts).
    useEditorServices(editors);
    upgradeCodeBoxes(document.body);
    // The turn's streamed answer renders as Markdown, in blocks (answerhook.ts).
    installAnswerHook(rendermime);
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
    // The tutor's cells go into the open notebook's model (cells.ts), not under it on disk.
    watchCells(notebooks);
    keepNotebooksCleanOnVersion(notebooks);
    // read_notebook reads the notebook on screen, panel open or not (livecells.ts).
    serveLiveCells(notebooks);
    let settings: PanelSettings = DEFAULTS;
    panel.setNotebook(notebooks.currentWidget);
    notebooks.currentChanged.connect((_, notebook) => {
      // Not following, the panel stays with its notebook while that one is open.
      if (settings.followNotebook || !panel.notebook || panel.notebook.isDisposed) {
        panel.setNotebook(notebook);
      }
    });
    notebooks.widgetAdded.connect((_, added) => {
      added.disposed.connect(() => {
        if (panel.notebook === added) {
          const current = notebooks.currentWidget;
          panel.setNotebook(current && !current.isDisposed ? current : null);
        }
      });
    });
    if (registry) {
      registry.transform(PLUGIN_ID, {
        fetch: plugin => ({ ...plugin, schema: translateSchema(plugin.schema) })
      });
      const apply = (loaded: ISettingRegistry.ISettings, first: boolean) => {
        const before = settings;
        settings = readSettings(loaded.composite as Record<string, unknown>);
        panel.sendKey = settings.sendKey;
        if (first || settings.openTab !== before.openTab) {
          panel.tab = settings.openTab;
        }
        if (settings.followNotebook && !before.followNotebook) {
          panel.setNotebook(notebooks.currentWidget);
        }
      };
      registry.load(PLUGIN_ID).then(
        loaded => {
          apply(loaded, true);
          loaded.changed.connect(() => apply(loaded, false));
        },
        reason => console.error('DeepTutor: the panel settings did not load.', reason)
      );
    }

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

    // The cell a command is about: from the context menu, the cell right-clicked (JupyterLab
    // does not make it the active one), in whichever notebook holds it; else the active cell.
    const activeCell = (args?: {
      readonly [key: string]: unknown;
    }): { cell: CellLike; selected: string; notebook: NotebookPanel | null } | null => {
      const hit = args?.fromMenu
        ? app.contextMenuHitTest(node => node.classList.contains('jp-Cell'))
        : undefined;
      const owner = hit ? notebooks.find(nb => nb.content.node.contains(hit)) : undefined;
      const panelOf = owner ?? notebooks.currentWidget;
      const cell = owner
        ? owner.content.widgets.find(w => w.node === hit)
        : panelOf?.content.activeCell;
      if (!panelOf || !cell) {
        return null;
      }
      return {
        cell: cell.model.toJSON() as CellLike,
        selected: selectedText(cell.editor),
        notebook: panelOf
      };
    };
    const open = () => app.commands.execute(OPEN_COMMAND);

    app.commands.addCommand(ABOUT_CELL_COMMAND, {
      label: __('Ask the tutor about this cell'),
      icon: tutorIcon,
      isEnabled: args => activeCell(args) !== null,
      execute: async args => {
        const active = activeCell(args);
        if (active) {
          panel.setNotebook(active.notebook); // the cell's own notebook
          // The cell goes as context the kernel reads; the selected text, if any, as a quote.
          const cell = cellAttachment(active.cell);
          const number = cell.kind === 'cell' ? (cell.number ?? null) : null;
          const quote = quoteAttachment(active.selected, number);
          panel.attach(quote ? [cell, quote] : [cell]);
          await open();
          panel.focusInput();
        }
      }
    });
    app.commands.addCommand(EXPLAIN_ERROR_COMMAND, {
      label: __('Explain this error'),
      icon: tutorIcon,
      isVisible: args => {
        const active = activeCell(args);
        return active !== null && errorOf(active.cell) !== null;
      },
      execute: async args => {
        const active = activeCell(args);
        if (active && errorOf(active.cell) !== null) {
          panel.setNotebook(active.notebook);
          await open();
          const cell: Attachment = cellAttachment(active.cell);
          await panel.ask(explainErrorQuestion(), [cell]);
        }
      }
    });
    app.contextMenu.addItem({
      command: ABOUT_CELL_COMMAND,
      selector: '.jp-Notebook .jp-Cell',
      rank: 30,
      args: { fromMenu: true }
    });
    app.contextMenu.addItem({
      command: EXPLAIN_ERROR_COMMAND,
      selector: '.jp-Notebook .jp-Cell',
      rank: 31,
      args: { fromMenu: true }
    });

    if (files) {
      addKnowledgeCommand(app, files, tutorIcon, async () => {
        await open();
        panel.tab = 'knowledge';
      });
    }
  }
};

/** The text selected in a cell's editor, if any. */
function selectedText(
  editor: {
    getSelection(): {
      start: { line: number; column: number };
      end: { line: number; column: number };
    };
    getOffsetAt(position: { line: number; column: number }): number;
    model: { sharedModel: { getSource(): string } };
  } | null
): string {
  if (!editor) {
    return '';
  }
  const { start, end } = editor.getSelection();
  const [from, to] = [editor.getOffsetAt(start), editor.getOffsetAt(end)].sort((a, b) => a - b);
  return editor.model.sharedModel.getSource().slice(from, to);
}

export default plugin;
