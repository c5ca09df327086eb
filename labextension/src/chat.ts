/**
 * The panel's end of the `deeptutor` comm: loads the extension in the notebook's kernel, opens
 * the comm, sends actions and folds the kernel's events into turns (chatmodel.ts). The kernel
 * end is deeptutor_jupyter/kernel/comm.py; docs/sidebar.md describes the protocol.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { ChatTurn, newTurn } from './chatmodel';
import { Chooser, chooseAction, chooserFrom } from './choice';
import { Attachment } from './context';
import { __ } from './i18n';
import {
  COMM_TARGET,
  Conversation,
  KernelMessage,
  PanelAction,
  Submission,
  TurnsMessage
} from './protocol';
import { QuizResolved } from './schema';
import { foldEvent } from './turnedits';

/** A question the kernel did not ask; `attachment` is the index of the attachment it refused. */
export class AskRefused extends Error {
  constructor(
    message: string,
    readonly attachment: number | null
  ) {
    super(message);
  }
}

interface Waiter<T> {
  key: string;
  resolve: (value: T) => void;
  reject: (error: Error) => void;
}

const LOAD_CODE = '%load_ext deeptutor_jupyter';

export class KernelChat {
  constructor(readonly session: ISessionContext) {
    session.kernelChanged.connect(this._onKernelChanged, this);
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get turns(): readonly ChatTurn[] {
    return this._turns;
  }

  get status(): string {
    return this._status;
  }

  get sessionId(): string {
    return this._sessionId;
  }

  /** The notebook the kernel serves, as the store names it (pending questions say the same). */
  get notebook(): string {
    return this._notebook;
  }

  /** Open the comm (loading the extension first) unless it is open. */
  async connect(): Promise<void> {
    this._wanted = true;
    if (this._comm && !this._comm.isDisposed) {
      return;
    }
    if (!this._connecting) {
      this._connecting = this._connect().finally(() => {
        this._connecting = null;
      });
    }
    return this._connecting;
  }

  /** Ask with the context attached; resolves once the turn started, rejects (AskRefused) when
   * the kernel refused it, e.g. an attachment it cannot read: nothing was asked then. */
  async ask(question: string, attachments: Attachment[] = []): Promise<void> {
    await this.connect();
    this.send({
      action: 'ask',
      question,
      conversation: null,
      attachments,
      notebook_path: this.session.path
    });
    // Replies come on a later tick (the comm is asynchronous), so waiting from here is in time.
    await new Promise<string>((resolve, reject) =>
      this._askWaiters.push({ key: '', resolve, reject })
    );
  }

  /** Ask the last question again in place of `turnId`'s answer (turnedits.ts); resolves once
   * the new turn started, rejects (AskRefused) with the kernel's refusal in words. */
  async regenerate(turnId: string): Promise<void> {
    await this.connect();
    this.send({ action: 'regenerate', turn_id: turnId });
    await new Promise<string>((resolve, reject) =>
      this._askWaiters.push({ key: '', resolve, reject })
    );
  }

  /** Delete one of this notebook's conversations; the kernel then lists what is current. */
  async deleteConversation(conversation: string): Promise<void> {
    await this.connect();
    this.send({ action: 'delete', conversation });
  }

  /** Send a quiz's answers; resolves with the grade, rejects with the refusal in words. */
  async answerQuiz(
    quizId: string,
    sessionId: string,
    answers: Record<string, string[] | string>,
    seconds: number
  ): Promise<QuizResolved> {
    await this.connect();
    this.send({ action: 'quiz_answer', quiz_id: quizId, session_id: sessionId, answers, seconds });
    return new Promise<QuizResolved>((resolve, reject) =>
      this._quizWaiters.push({ key: quizId, resolve, reject })
    );
  }

  /** The notebook's conversations (those with turns), oldest first. */
  get conversations(): readonly Conversation[] {
    return this._conversations;
  }

  async newConversation(): Promise<void> {
    await this.connect();
    this.send({ action: 'new' });
  }

  async switchTo(conversation: string): Promise<void> {
    await this.connect();
    this.send({ action: 'switch', conversation });
  }

  /** Name a conversation of this notebook; an empty name goes back to its first question. */
  async rename(conversation: string, title: string): Promise<void> {
    await this.connect();
    this.send({ action: 'rename', conversation, title: title.trim().slice(0, 80) });
  }

  /** What the chooser shows for the current conversation (null: nothing offered yet). */
  get chooser(): Chooser | null {
    return this._chooser && this._chooser.sessionId === this._sessionId ? this._chooser : null;
  }

  /** Choose the conversation's model ('' = the configured one) and knowledge base ('' = none);
   * the kernel checks it and answers with the new choices, or refuses in words (the status). */
  async choose(model: string, kb: string): Promise<void> {
    const chooser = this.chooser;
    if (!chooser) {
      return;
    }
    await this.connect();
    this.send(chooseAction(chooser, model, kb));
  }

  stop(turnId: string): void {
    this.send({ action: 'stop', turn_id: turnId });
  }

  /** Answer a question of one of this kernel's turns; the kernel refuses in words if it must. */
  async answer(requestId: string, sessionId: string, answer: Submission): Promise<void> {
    await this.connect();
    const reply = this._awaitAnswer(requestId);
    this.send({
      action: 'answer',
      request_id: requestId,
      session_id: sessionId,
      selections: answer.selections,
      custom_input: answer.custom_input,
      cancelled: answer.cancelled
    });
    return reply;
  }

  dispose(): void {
    this.session.kernelChanged.disconnect(this._onKernelChanged, this);
    this._comm?.close();
    this._comm = null;
    Signal.clearData(this);
  }

  private send(action: PanelAction): void {
    if (!this._comm || this._comm.isDisposed) {
      throw new Error(__('The tutor is not connected to this notebook\u2019s kernel.'));
    }
    // The comm's data is a JSON object; the protocol types are plain JSON.
    this._comm.send(action as unknown as KM.ICommMsgMsg['content']['data']);
  }

  private async _connect(): Promise<void> {
    await this.session.ready;
    const kernel = this.session.session?.kernel;
    if (!kernel) {
      this._setStatus(__('No kernel: start one to talk to the tutor.'));
      return;
    }
    this._setStatus(__('Connecting to the kernel\u2026'));
    const load = kernel.requestExecute({ code: LOAD_CODE, silent: true, store_history: false });
    const reply = await load.done;
    if (reply.content.status !== 'ok') {
      this._setStatus(__('The kernel could not load deeptutor_jupyter (is it installed there?).'));
      return;
    }
    this._open(kernel);
  }

  private _open(kernel: Kernel.IKernelConnection): void {
    const comm = kernel.createComm(COMM_TARGET);
    comm.onMsg = msg => this._onMessage(msg.content.data as unknown as KernelMessage);
    comm.onClose = () => {
      if (this._comm === comm) {
        this._comm = null;
        this._failWaiters();
        this._setStatus(__('Disconnected from the kernel.'));
      }
    };
    this._comm = comm;
    comm.open({});
    this._setStatus('');
  }

  private _onMessage(message: KernelMessage): void {
    if (message.type === 'event') {
      const next = foldEvent(this._turns, message.event);
      if (next === this._turns) {
        return;
      }
      this._turns = next;
      this._changed.emit();
    } else if (message.type === 'turns') {
      this._onTurns(message);
    } else if (message.type === 'choices') {
      this._chooser = chooserFrom(message);
      this._setStatus('');
    } else if (message.type === 'answered') {
      this._settleAnswer(message.request_id, null);
    } else if (message.type === 'asked') {
      settle(this._askWaiters, null, waiter => waiter.resolve(message.turn_id));
    } else if (message.type === 'quiz_graded') {
      settle(this._quizWaiters, message.quiz_id, waiter =>
        waiter.resolve({
          type: 'quiz_resolved',
          seq: 0,
          turn_id: '',
          ts: Date.now() / 1000,
          id: message.quiz_id,
          tool_call_id: '',
          score: message.score,
          results: message.results ?? []
        })
      );
    } else if (message.type === 'error') {
      const { action } = message;
      if ((action === 'ask' || action === 'regenerate') && this._askWaiters.length) {
        const refused = new AskRefused(message.message, message.attachment ?? null);
        settle(this._askWaiters, null, waiter => waiter.reject(refused));
      } else if (action === 'quiz_answer' && message.quiz_id) {
        const error = new Error(message.message);
        settle(this._quizWaiters, message.quiz_id, waiter => waiter.reject(error));
      } else if (message.action === 'answer' && this._answerWaiters.length) {
        // The kernel handles actions in order: a refusal answers the oldest open answer.
        this._settleAnswer(this._answerWaiters[0].requestId, new Error(message.message));
      } else {
        this._setStatus(message.message);
      }
    }
  }

  private _settleAnswer(requestId: string, error: Error | null): void {
    const at = this._answerWaiters.findIndex(w => w.requestId === requestId);
    if (at < 0) {
      return;
    }
    const waiter = this._answerWaiters.splice(at, 1)[0];
    if (error) {
      waiter.reject(error);
    } else {
      waiter.resolve();
    }
  }

  /** The kernel's turns of this conversation: replay what this panel has not seen. */
  private _onTurns(message: TurnsMessage): void {
    if (message.session_id !== this._sessionId) {
      this._turns = []; // another conversation: its own turns only
    }
    this._sessionId = message.session_id;
    this._notebook = message.notebook;
    this._conversations = message.conversations ?? [];
    for (const summary of message.turns) {
      const known = this._turns.find(t => t.turnId === summary.turn_id);
      if (!known) {
        this._turns = [...this._turns, newTurn(summary.turn_id, summary.question)];
      }
      const after = known ? known.lastSeq : 0;
      if (summary.last_seq > after) {
        this.send({ action: 'subscribe', turn_id: summary.turn_id, after_seq: after });
      }
    }
    this._changed.emit();
  }

  private _awaitAnswer(requestId: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this._answerWaiters.push({ requestId, resolve, reject });
    });
  }

  /** A restarted or changed kernel: reconnect only a chat that was connected (shown) before. */
  private _onKernelChanged(): void {
    this._comm = null;
    this._failWaiters();
    this._turns = [];
    this._changed.emit();
    if (this._wanted) {
      void this.connect();
    }
  }

  /** Nothing will answer the actions in flight any more: say so instead of waiting forever. */
  private _failWaiters(): void {
    const gone = new Error(__('The kernel went away before it answered; try again.'));
    const waiters = [
      ...this._askWaiters.splice(0),
      ...this._quizWaiters.splice(0),
      ...this._answerWaiters.splice(0)
    ];
    for (const waiter of waiters) {
      waiter.reject(gone);
    }
  }

  private _setStatus(status: string): void {
    this._status = status;
    this._changed.emit();
  }

  private _comm: Kernel.IComm | null = null;
  private _wanted = false;
  private _connecting: Promise<void> | null = null;
  private _turns: readonly ChatTurn[] = [];
  private _status = '';
  private _sessionId = '';
  private _conversations: Conversation[] = [];
  private _chooser: Chooser | null = null;
  private _notebook = '';
  private _answerWaiters: {
    requestId: string;
    resolve: () => void;
    reject: (error: Error) => void;
  }[] = [];
  private _askWaiters: Waiter<string>[] = [];
  private _quizWaiters: Waiter<QuizResolved>[] = [];
  private _changed = new Signal<this, void>(this);
}

/** The waiter for `key` (the oldest when null: the kernel answers actions in order), removed. */
function settle<T>(
  waiters: Waiter<T>[],
  key: string | null,
  then: (waiter: Waiter<T>) => void
): void {
  const at = key === null ? 0 : waiters.findIndex(w => w.key === key);
  if (at >= 0 && at < waiters.length) {
    then(waiters.splice(at, 1)[0]);
  }
}
