/**
 * The Tutor panel in the right sidebar: Chat (over the focused notebook's kernel), Pending
 * (every waiting question, through the server), Memory and Knowledge (read through the server).
 */
import { Clipboard, ISessionContext, InputDialog, ReactWidget } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import * as React from 'react';

import { AskRefused, KernelChat } from './chat';
import { CONTEXT_TOOLS, ChatTurn, ToolCard } from './chatmodel';
import {
  Attachment,
  Chip,
  DropData,
  addChips,
  attachmentsFromDrop,
  canDrop,
  chipLabel,
  markChip,
  removeChip
} from './context';
import { AskUserCard } from './form';
import { __ } from './i18n';
import { QuizCard } from './quiz';
import { DEFAULTS, SendKey, Tab, sendHint, sendsQuestion } from './settings';
import { KnowledgeTab, MemoryTab, PendingTab } from './tabs';
import { reasonText } from './errors';
import { follow, nearBottom } from './follow';
import { SourceList, sourceList } from './sources';
import { CodeActions, addCodeButtons, insertionAt } from './codeblocks';
import { ChoiceBar } from './chooser';
import { turnChoiceLabel } from './choice';
import { MasteryTab } from './masterytab';
import { DeleteConversationButton, RegenerateButton } from './conversationedits';
import { regenerable } from './turnedits';

/** A Lumino drag event (cells from a notebook, files from the file browser). */
interface DragEventLike extends Event {
  mimeData: DropData;
  dropAction: string;
  proposedAction: string;
}

const DRAG_EVENTS = ['lm-dragenter', 'lm-dragleave', 'lm-dragover', 'lm-drop'];

export type { Tab };
const TABS = (): [Tab, string][] => [
  ['chat', __('Chat')],
  ['pending', __('Pending')],
  ['memory', __('Memory')],
  ['knowledge', __('Knowledge')],
  ['progress', __('Progress')]
];

export class TutorPanel extends ReactWidget {
  /** ``scratch`` starts the kernel of the conversation offered when no notebook is open. */
  constructor(
    readonly rendermime: IRenderMimeRegistry,
    private readonly scratch: (() => Promise<ISessionContext>) | null = null
  ) {
    super();
    this.id = 'deeptutor-panel';
    this.addClass('jp-DeepTutorPanel');
  }

  get tab(): Tab {
    return this._tab;
  }

  set tab(tab: Tab) {
    this._tab = tab;
    this.update();
  }

  /** A code block of an answer as a new code cell below the notebook's active cell. */
  insertCode(source: string): void {
    const notebook = this._notebook?.content;
    const model = notebook?.model;
    if (!notebook || !model) {
      return;
    }
    const at = insertionAt(notebook.activeCellIndex, model.sharedModel.cells.length);
    model.sharedModel.insertCell(at, { cell_type: 'code', source });
    notebook.activeCellIndex = at;
  }

  /** The notebook the panel talks to (null: none, or the scratch conversation). */
  get notebook(): NotebookPanel | null {
    return this._notebook;
  }

  /** The key that sends the chat box's question (the `sendKey` setting). */
  set sendKey(key: SendKey) {
    this._sendKey = key;
    this.update();
  }

  /** Put text in the chat box for the learner to finish. */
  setDraft(text: string): void {
    this._draft = text;
    this._tab = 'chat';
    this.update();
  }

  /** The chips that go with the next question. */
  get chips(): readonly Chip[] {
    return (this._chat && this._chips.get(this._chat)) || [];
  }

  /** Attach context to the next question ("Ask the tutor about this cell", a drop). */
  attach(attachments: Attachment[]): void {
    this._setChips(addChips(this.chips, attachments));
    this._tab = 'chat';
    this.update();
  }

  /** Ask at once in the focused notebook's chat ("Explain this error"). */
  async ask(question: string, attachments: Attachment[] = []): Promise<void> {
    this._tab = 'chat';
    this.update();
    if (!this._chat) {
      throw new Error(__('Open a notebook to talk to the tutor beside it.'));
    }
    this._problem = '';
    try {
      await this._chat.ask(question, attachments);
    } catch (reason) {
      // Nothing was asked: say why where the chat box is, as for a question typed there.
      this._problem = reasonText(reason);
    }
    this.update();
  }

  /** Put the cursor in the chat box (after attaching a cell, the question comes next). */
  focusInput(): void {
    requestAnimationFrame(() => this.node.querySelector('textarea')?.focus());
  }

  /** Cells and files dropped on the chat become chips (Lumino's drag events, not HTML5's). */
  handleEvent(event: Event): void {
    const drag = event as DragEventLike;
    if (!DRAG_EVENTS.includes(event.type) || !drag.mimeData || !canDrop(drag.mimeData)) {
      return;
    }
    const target = event.target as HTMLElement | null;
    const chat = target?.closest?.('.jp-DeepTutorChat') ?? null;
    if (event.type === 'lm-dragleave') {
      this.node.classList.remove('jp-mod-dropTarget');
      return;
    }
    if (!chat) {
      this.node.classList.remove('jp-mod-dropTarget');
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    if (event.type === 'lm-dragenter' || event.type === 'lm-dragover') {
      drag.dropAction = drag.proposedAction;
      this.node.classList.add('jp-mod-dropTarget');
      return;
    }
    this.node.classList.remove('jp-mod-dropTarget');
    drag.dropAction = drag.proposedAction;
    this.attach(attachmentsFromDrop(drag.mimeData));
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    for (const type of DRAG_EVENTS) {
      this.node.addEventListener(type, this);
    }
  }

  protected onBeforeDetach(msg: Message): void {
    for (const type of DRAG_EVENTS) {
      this.node.removeEventListener(type, this);
    }
    super.onBeforeDetach(msg);
  }

  /** Follow the notebook in focus (null: none open, the scratch conversation if started). */
  setNotebook(notebook: NotebookPanel | null): void {
    if (notebook === this._notebook && (notebook || this._chat === this._scratchChat)) {
      return;
    }
    this._chat?.changed.disconnect(this._onChat, this);
    this._notebook = notebook;
    this._chat = notebook ? null : this._scratchChat;
    if (this._chat) {
      this._chat.changed.connect(this._onChat, this);
    }
    if (notebook) {
      let chat = this._chats.get(notebook);
      if (!chat) {
        chat = new KernelChat(notebook.sessionContext);
        this._chats.set(notebook, chat);
        notebook.disposed.connect(() => {
          chat?.dispose();
          this._chats.delete(notebook);
        });
      }
      this._chat = chat;
      chat.changed.connect(this._onChat, this);
      if (this.isVisible) {
        void chat.connect();
      }
    }
    this.update();
  }

  /** A conversation in a kernel of its own, for when no notebook is open. */
  async startScratch(): Promise<void> {
    if (!this.scratch || this._scratchChat) {
      return;
    }
    const context = await this.scratch();
    this._scratchChat = new KernelChat(context);
    if (!this._notebook) {
      this._chat = this._scratchChat;
      this._chat.changed.connect(this._onChat, this);
      await this._chat.connect();
    }
    this.update();
  }

  /** Connect only once the panel is shown: a hidden panel loads nothing into any kernel. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this._chat?.connect();
  }

  protected render(): React.ReactElement {
    return (
      <div className="jp-DeepTutorPanel-body">
        <div className="jp-DeepTutorPanel-tabs" role="tablist">
          {TABS().map(([tab, label]) => (
            <button
              key={tab}
              role="tab"
              aria-selected={tab === this._tab}
              className={`jp-DeepTutorPanel-tab${tab === this._tab ? ' jp-mod-active' : ''}`}
              onClick={() => (this.tab = tab)}
            >
              {label}
            </button>
          ))}
        </div>
        <div className="jp-DeepTutorPanel-content">{this._content()}</div>
      </div>
    );
  }

  private _content(): React.ReactElement {
    switch (this._tab) {
      case 'chat':
        return (
          <ChatTab
            chat={this._chat}
            notebook={
              this._notebook
                ? __('Notebook: %1', this._notebook.title.label)
                : __('Scratch conversation, in a kernel of its own')
            }
            onScratch={this.scratch ? () => void this.startScratch() : null}
            rendermime={this.rendermime}
            code={{
              copy: code => Clipboard.copyToSystem(code),
              insert: this._notebook ? code => this.insertCode(code) : null
            }}
            sendKey={this._sendKey}
            draft={this._draft}
            onDraft={text => {
              this._draft = text;
              this.update();
            }}
            chips={this.chips}
            onChips={chips => this._setChips(chips)}
            problem={this._problem}
            clearProblem={() => {
              this._problem = '';
            }}
          />
        );
      case 'pending':
        return (
          <PendingTab
            chat={this._chat}
            renderText={text => <Markdown text={text} rendermime={this.rendermime} />}
          />
        );
      case 'memory':
        return <MemoryTab />;
      case 'knowledge':
        return <KnowledgeTab />;
      case 'progress':
        return (
          <MasteryTab renderText={text => <Markdown text={text} rendermime={this.rendermime} />} />
        );
    }
  }

  private _setChips(chips: Chip[]): void {
    if (this._chat) {
      this._chips.set(this._chat, chips);
    }
    this.update();
  }

  private _onChat(): void {
    this.update();
  }

  private _tab: Tab = 'chat';
  private _draft = '';
  // Per notebook: a cell [N] means that notebook's kernel's [N], never another's.
  private _chips = new WeakMap<KernelChat, Chip[]>();
  private _sendKey: SendKey = DEFAULTS.sendKey;
  private _problem = ''; // why the last ask from a command was not asked
  private _notebook: NotebookPanel | null = null;
  private _chat: KernelChat | null = null;
  private _chats = new Map<NotebookPanel, KernelChat>();
  private _scratchChat: KernelChat | null = null;
}

function Markdown(props: {
  text: string;
  rendermime: IRenderMimeRegistry;
  code?: CodeActions;
}): React.ReactElement {
  const ref = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    const host = ref.current;
    if (!host) {
      return;
    }
    const renderer = props.rendermime.createRenderer('text/markdown');
    void renderer
      .renderModel(new MimeModel({ data: { 'text/markdown': props.text }, trusted: false }))
      .then(() => {
        host.replaceChildren(renderer.node);
        if (props.code) {
          addCodeButtons(renderer.node, props.code);
        }
        // The renderer typesets math when attached as a widget; a node placed by hand is not.
        void props.rendermime.latexTypesetter?.typeset(renderer.node);
      });
    return () => renderer.dispose();
  }, [props.text]);
  return <div className="jp-DeepTutorChat-markdown" ref={ref} />;
}

const STATUS = (): Record<ChatTurn['status'], string> => ({
  running: __('Answering\u2026'),
  waiting: __('Waiting for your answer'),
  done: __('Done'),
  cancelled: __('Stopped'),
  error: __('Failed')
});

function SourcesView(props: { list: SourceList }): React.ReactElement {
  return (
    <div className="jp-DeepTutorChat-sources">
      <div className="jp-DeepTutorChat-sourcesHeading">{props.list.heading}</div>
      <ol>
        {props.list.items.map(item => (
          <li key={item.n} value={item.n} title={item.path}>
            {item.label}
          </li>
        ))}
      </ol>
    </div>
  );
}

function TurnView(props: {
  turn: ChatTurn;
  chat: KernelChat;
  rendermime: IRenderMimeRegistry;
  code: CodeActions;
  regenerable?: boolean;
}): React.ReactElement {
  const { turn, chat } = props;
  const live = turn.status === 'running' || turn.status === 'waiting';
  return (
    <div className="jp-DeepTutorChat-turn" data-turn-id={turn.turnId} data-status={turn.status}>
      <div className="jp-DeepTutorChat-question">{turn.question}</div>
      {turn.blocks.map((block, i) => {
        if (block.kind === 'text') {
          return (
            <Markdown key={i} text={block.text} rendermime={props.rendermime} code={props.code} />
          );
        }
        if (block.kind === 'tool') {
          const tool = turn.tools.find(t => t.id === block.id);
          return tool ? <ToolCardView key={i} tool={tool} /> : null;
        }
        if (block.kind === 'quiz') {
          const q = turn.quizzes.find(x => x.quiz.id === block.id);
          return q ? (
            <QuizCard
              key={i}
              quiz={q.quiz}
              resolved={q.resolved}
              renderText={text => <Markdown text={text} rendermime={props.rendermime} />}
              onSubmit={(answers, seconds) =>
                chat.answerQuiz(q.quiz.id, q.quiz.session_id, answers, seconds)
              }
            />
          ) : null;
        }
        const q = turn.questions.find(x => x.request.id === block.id);
        return q ? (
          <AskUserCard
            key={i}
            request={q.request}
            settled={q.settled}
            renderText={text => <Markdown text={text} rendermime={props.rendermime} />}
            onSubmit={answer =>
              chat.answer(q.request.id, q.request.session_id ?? chat.sessionId, answer)
            }
          />
        ) : null;
      })}
      {turn.sources.length > 0 && !live ? (
        <SourcesView list={sourceList(turn.sources, turn.answer)} />
      ) : null}
      {turn.errors.map((error, i) => (
        <div key={i} className="jp-DeepTutorChat-error">
          {error}
        </div>
      ))}
      {turn.notices.map((notice, i) => (
        <div key={i} className="jp-DeepTutorChat-notice">
          {notice}
        </div>
      ))}
      <div className="jp-DeepTutorChat-status">
        <span>{STATUS()[turn.status]}</span>
        {turn.model ? (
          <span className="jp-DeepTutorChat-used" title={__('Model and knowledge base used')}>
            {turnChoiceLabel(turn.model, turn.kbs, __('KB'))}
          </span>
        ) : null}
        {live ? (
          <button
            className="jp-Button jp-mod-styled jp-mod-warn"
            onClick={() => chat.stop(turn.turnId)}
          >
            {__('Stop')}
          </button>
        ) : null}
        {props.regenerable ? <RegenerateButton chat={chat} turnId={turn.turnId} /> : null}
      </div>
    </div>
  );
}

/** A tool's card; context the learner attached opens to what the model read. */
function ToolCardView(props: { tool: ToolCard }): React.ReactElement {
  const { tool } = props;
  const head = (
    <>
      <span className="jp-DeepTutorChat-toolName">{tool.name}</span>
      <span className="jp-DeepTutorChat-toolSummary">{tool.done ? tool.summary : '\u2026'}</span>
    </>
  );
  const error = tool.isError ? ' jp-mod-error' : '';
  if (!CONTEXT_TOOLS.includes(tool.name) || !tool.content) {
    return <div className={`jp-DeepTutorChat-tool${error}`}>{head}</div>;
  }
  return (
    <details className={`jp-DeepTutorChat-tool jp-DeepTutorChat-context${error}`}>
      <summary title={__('What the tutor read')}>
        <span className="jp-DeepTutorChat-toolName">{__('Context')}</span>
        <span className="jp-DeepTutorChat-toolSummary">{tool.summary}</span>
      </summary>
      <pre className="jp-DeepTutorChat-contextBody">{tool.content}</pre>
    </details>
  );
}

function ChipList(props: {
  chips: readonly Chip[];
  onRemove: (index: number) => void;
}): React.ReactElement | null {
  if (!props.chips.length) {
    return null;
  }
  return (
    <div className="jp-DeepTutorChat-chips" aria-label={__('Attached to the next question')}>
      {props.chips.map((chip, i) => (
        <span
          key={i}
          className={`jp-DeepTutorChat-chip jp-mod-${chip.attachment.kind}${chip.error ? ' jp-mod-error' : ''}`}
          title={chip.error ?? ''}
        >
          <span className="jp-DeepTutorChat-chipLabel">{chipLabel(chip.attachment)}</span>
          {chip.error ? <span className="jp-DeepTutorChat-chipError">{chip.error}</span> : null}
          <button
            className="jp-DeepTutorChat-chipRemove"
            aria-label={__('Remove %1', chipLabel(chip.attachment))}
            title={__('Remove')}
            onClick={() => props.onRemove(i)}
          >
            {'\u00d7'}
          </button>
        </span>
      ))}
    </div>
  );
}

function ChatTab(props: {
  chat: KernelChat | null;
  notebook: string;
  rendermime: IRenderMimeRegistry;
  sendKey: SendKey;
  draft: string;
  onDraft: (text: string) => void;
  chips: readonly Chip[];
  onChips: (chips: Chip[]) => void;
  problem: string;
  clearProblem: () => void;
  onScratch: (() => void) | null;
  code: CodeActions;
}): React.ReactElement {
  const question = props.draft;
  const setQuestion = props.onDraft;
  const [problem, setProblem] = React.useState('');
  const { chat } = props;
  // Follow the newest answer unless the learner scrolled up (follow.ts); the input stays below.
  const turnsRef = React.useRef<HTMLDivElement>(null);
  const following = React.useRef(true);
  const innerRef = React.useRef<HTMLDivElement>(null);
  React.useLayoutEffect(() => {
    if (turnsRef.current) {
      follow(turnsRef.current, following.current);
    }
  });
  // Answers grow after React's render too (JupyterLab renders Markdown and math later).
  React.useEffect(() => {
    const outer = turnsRef.current;
    const inner = innerRef.current;
    if (!outer || !inner) {
      return;
    }
    const observer = new ResizeObserver(() => follow(outer, following.current));
    observer.observe(inner);
    return () => observer.disconnect();
  }, [chat]);
  if (!chat) {
    return (
      <div className="jp-DeepTutorPanel-empty">
        <p>{__('Open a notebook to talk to the tutor beside it.')}</p>
        {props.onScratch ? (
          <button className="jp-Button jp-mod-styled jp-mod-accept" onClick={props.onScratch}>
            {__('Start a scratch conversation')}
          </button>
        ) : null}
      </div>
    );
  }
  const ask = () => {
    const text = question.trim();
    if (!text) {
      return;
    }
    setProblem('');
    props.clearProblem();
    following.current = true; // a new question: show its answer as it comes
    const chips = props.chips;
    chat
      .ask(
        text,
        chips.map(c => c.attachment)
      )
      .then(
        () => {
          setQuestion('');
          props.onChips([]);
        },
        reason => {
          // Nothing was asked: the question and the chips stay, the refused chip says why.
          if (reason instanceof AskRefused && reason.attachment !== null) {
            props.onChips(markChip(chips, reason.attachment, reason.message));
          } else {
            setProblem(reasonText(reason));
          }
        }
      );
  };
  const current = chat.conversations.find(c => c.id === chat.sessionId);
  return (
    <div className="jp-DeepTutorChat">
      <div className="jp-DeepTutorChat-where">
        <span>{props.notebook}</span>
        <select
          className="jp-DeepTutorChat-conversations"
          aria-label={__('Conversation')}
          value={chat.sessionId}
          onChange={e => void chat.switchTo(e.target.value)}
        >
          {chat.conversations.some(c => c.id === chat.sessionId) ? null : (
            <option value={chat.sessionId}>{__('New conversation')}</option>
          )}
          {chat.conversations.map(c => (
            <option key={c.id} value={c.id}>
              {__('%1 (%2)', c.title, c.turns)}
            </option>
          ))}
        </select>
        <span className="jp-DeepTutorChat-actions">
          {current ? (
            <button
              className="jp-Button jp-mod-styled jp-DeepTutorChat-rename"
              title={__('Rename this conversation')}
              onClick={() => void renameConversation(chat, current.id, current.title)}
            >
              {__('Rename')}
            </button>
          ) : null}
          {current ? <DeleteConversationButton chat={chat} conversation={current} /> : null}
          <button
            className="jp-Button jp-mod-styled jp-DeepTutorChat-new"
            title={__('Start a new conversation in this notebook')}
            onClick={() => void chat.newConversation()}
          >
            {__('New')}
          </button>
        </span>
      </div>
      <ChoiceBar chat={chat} />
      <div
        className="jp-DeepTutorChat-turns"
        ref={turnsRef}
        onScroll={e => {
          following.current = nearBottom(e.currentTarget);
        }}
      >
        <div ref={innerRef}>
          {chat.turns.map(turn => (
            <TurnView
              key={turn.turnId}
              turn={turn}
              chat={chat}
              rendermime={props.rendermime}
              code={props.code}
              regenerable={turn.turnId === regenerable(chat.turns)}
            />
          ))}
        </div>
      </div>
      {chat.status || problem || props.problem ? (
        <div className="jp-DeepTutorChat-connection">{problem || props.problem || chat.status}</div>
      ) : null}
      <ChipList chips={props.chips} onRemove={i => props.onChips(removeChip(props.chips, i))} />
      <div className="jp-DeepTutorChat-input">
        <textarea
          className="jp-mod-styled"
          placeholder={sendHint(props.sendKey)}
          value={question}
          onChange={e => setQuestion(e.target.value)}
          onKeyDown={e => {
            if (sendsQuestion(props.sendKey, e.nativeEvent)) {
              e.preventDefault();
              ask();
            }
          }}
        />
        <button className="jp-Button jp-mod-styled jp-mod-accept" onClick={ask}>
          {__('Ask')}
        </button>
      </div>
    </div>
  );
}

/** Ask for a conversation's new name in JupyterLab's dialog; Cancel changes nothing. */
async function renameConversation(chat: KernelChat, id: string, title: string): Promise<void> {
  const result = await InputDialog.getText({
    title: __('Rename the conversation'),
    label: __('Name (empty: its first question)'),
    text: title,
    okLabel: __('Rename')
  });
  if (result.button.accept && result.value !== null) {
    await chat.rename(id, result.value);
  }
}
