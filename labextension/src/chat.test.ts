// KernelChat against a fake session, kernel and comm: what it sends, how it folds what the
// kernel says into turns, and that no promise outlives the comm that would have settled it.
import { ISessionContext } from '@jupyterlab/apputils';
import { KernelMessage as KM } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';
import { beforeEach, describe, expect, it } from 'vitest';

import { AskRefused, KernelChat } from './chat';
import { KernelMessage, PanelAction } from './protocol';

class FakeComm {
  readonly sent: PanelAction[] = [];
  opened = false;
  isDisposed = false;
  onMsg: ((msg: KM.ICommMsgMsg) => void) | null = null;
  onClose: ((msg: KM.ICommCloseMsg) => void) | null = null;

  constructor(readonly target: string) {}

  open(): void {
    this.opened = true;
  }

  send(data: unknown): void {
    this.sent.push(data as PanelAction);
  }

  /** The kernel says something to the panel. */
  receive(message: KernelMessage): void {
    this.onMsg?.({ content: { data: message } } as unknown as KM.ICommMsgMsg);
  }

  /** The kernel side went away (kernel died, comm closed). */
  close(): void {
    this.isDisposed = true;
    this.onClose?.({} as KM.ICommCloseMsg);
  }
}

class FakeKernel {
  readonly comms: FakeComm[] = [];
  readonly executed: string[] = [];
  loadStatus: 'ok' | 'error' = 'ok';

  createComm(target: string): FakeComm {
    this.comms.push(new FakeComm(target));
    return this.comms[this.comms.length - 1];
  }

  requestExecute(content: { code: string }): { done: Promise<unknown> } {
    this.executed.push(content.code);
    return { done: Promise.resolve({ content: { status: this.loadStatus } }) };
  }

  get comm(): FakeComm {
    return this.comms[this.comms.length - 1];
  }
}

class FakeSession {
  readonly kernelChanged = new Signal<this, unknown>(this);
  readonly ready = Promise.resolve();
  readonly path = 'lesson.ipynb';
  session: { kernel: FakeKernel | null } = { kernel: new FakeKernel() };

  get kernel(): FakeKernel {
    return this.session.kernel as FakeKernel;
  }
}

/** Every action the panel sent, in order, on any comm. */
function sent(session: FakeSession): PanelAction[] {
  return session.kernel.comms.flatMap(c => c.sent);
}

/** Whether a promise has settled by now (after pending microtasks ran). */
async function state(promise: Promise<unknown>): Promise<'pending' | 'resolved' | 'rejected'> {
  let result: 'pending' | 'resolved' | 'rejected' = 'pending';
  promise.then(
    () => (result = 'resolved'),
    () => (result = 'rejected')
  );
  await new Promise(resolve => setTimeout(resolve, 0));
  return result;
}

let session: FakeSession;
let chat: KernelChat;

beforeEach(() => {
  session = new FakeSession();
  chat = new KernelChat(session as unknown as ISessionContext);
});

describe('connecting', () => {
  it('loads the extension, then opens the deeptutor comm once', async () => {
    await Promise.all([chat.connect(), chat.connect()]);
    await chat.connect();
    expect(session.kernel.executed).toEqual(['%load_ext deeptutor_jupyter']);
    expect(session.kernel.comms.map(c => [c.target, c.opened])).toEqual([['deeptutor', true]]);
    expect(chat.status).toBe('');
  });

  it('says so when the kernel cannot load the extension, and opens nothing', async () => {
    session.kernel.loadStatus = 'error';
    await chat.connect();
    expect(session.kernel.comms).toEqual([]);
    expect(chat.status).toContain('could not load deeptutor_jupyter');
  });

  it('says so without a kernel', async () => {
    session.session.kernel = null;
    await chat.connect();
    expect(chat.status).toContain('No kernel');
  });

  it('refuses to send when not connected', () => {
    expect(() => chat.stop('turn-1')).toThrow('not connected');
  });
});

describe('sending and receiving', () => {
  it('asks with the notebook path and resolves when the kernel says the turn started', async () => {
    const asked = chat.ask('What is rank?');
    await Promise.resolve();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(sent(session)).toEqual([
      {
        action: 'ask',
        question: 'What is rank?',
        conversation: null,
        attachments: [],
        notebook_path: 'lesson.ipynb'
      }
    ]);
    expect(await state(asked)).toBe('pending');
    session.kernel.comm.receive({ type: 'asked', turn_id: 'turn-1' });
    expect(await state(asked)).toBe('resolved');
  });

  it('rejects an ask the kernel refused, naming the attachment', async () => {
    const asked = chat.ask('Read this', [{ kind: 'file', path: 'nope.txt' } as never]);
    await new Promise(resolve => setTimeout(resolve, 0));
    session.kernel.comm.receive({
      type: 'error',
      action: 'ask',
      message: 'Cannot read nope.txt',
      attachment: 0
    });
    const error = await asked.catch(e => e);
    expect(error).toBeInstanceOf(AskRefused);
    expect([error.message, error.attachment]).toEqual(['Cannot read nope.txt', 0]);
  });

  it('folds events into turns and tells its listeners', async () => {
    await chat.connect();
    let changes = 0;
    chat.changed.connect(() => changes++);
    const comm = session.kernel.comm;
    const event = (seq: number, type: string, data: object) =>
      comm.receive({
        type: 'event',
        event: { type, seq, turn_id: 'turn-1', ...data }
      } as unknown as KernelMessage);
    event(1, 'turn_started', { question: 'What is rank?' });
    event(2, 'content', { text: 'It counts pivots.' });
    event(2, 'content', { text: 'It counts pivots.' }); // seen already: no change
    event(3, 'done', { status: 'done', answer: 'It counts pivots.' });
    expect(changes).toBe(3);
    expect(chat.turns.map(t => [t.turnId, t.question, t.answer, t.status])).toEqual([
      ['turn-1', 'What is rank?', 'It counts pivots.', 'done']
    ]);
  });

  it('subscribes to what it has not seen of the turns the kernel lists', async () => {
    await chat.connect();
    const comm = session.kernel.comm;
    const listing = { type: 'turns' as const, notebook: 'lesson.ipynb', conversations: [] };
    comm.receive({ ...listing, session_id: 'nb-1', turns: [] });
    comm.receive({
      type: 'event',
      event: { type: 'turn_started', seq: 1, turn_id: 'turn-1', question: 'q' }
    } as unknown as KernelMessage);
    comm.receive({
      type: 'turns',
      session_id: 'nb-1',
      notebook: 'lesson.ipynb',
      conversations: [{ id: 'nb-1', title: 'q', turns: 2, started_at: 1 }],
      turns: [
        { turn_id: 'turn-1', question: 'q', status: 'running', last_seq: 4 },
        { turn_id: 'turn-2', question: 'r', status: 'done', last_seq: 2 }
      ]
    });
    expect(comm.sent).toEqual([
      { action: 'subscribe', turn_id: 'turn-1', after_seq: 1 },
      { action: 'subscribe', turn_id: 'turn-2', after_seq: 0 }
    ]);
    expect([chat.sessionId, chat.notebook, chat.conversations.length]).toEqual([
      'nb-1',
      'lesson.ipynb',
      1
    ]);
    expect(chat.turns.map(t => t.turnId)).toEqual(['turn-1', 'turn-2']);
    // Another conversation: its own turns only.
    comm.receive({ ...listing, session_id: 'nb-2', turns: [] });
    expect(chat.turns).toEqual([]);
  });

  it('settles an answer by its request id, and a refusal rejects the oldest', async () => {
    const submission = { selections: ['safe'], custom_input: '', cancelled: false };
    const first = chat.answer('ask_1', 'nb-1', submission);
    await new Promise(resolve => setTimeout(resolve, 0));
    const second = chat.answer('ask_2', 'nb-1', submission);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(sent(session)).toContainEqual({
      action: 'answer',
      request_id: 'ask_1',
      session_id: 'nb-1',
      selections: ['safe'],
      custom_input: '',
      cancelled: false
    });
    const comm = session.kernel.comm;
    comm.receive({ type: 'answered', request_id: 'ask_2', result: { selections: ['safe'] } });
    expect(await state(second)).toBe('resolved');
    expect(await state(first)).toBe('pending');
    comm.receive({ type: 'error', action: 'answer', message: 'Already answered.' });
    await expect(first).rejects.toThrow('Already answered.');
  });

  it('resolves a quiz answer with its grade', async () => {
    const graded = chat.answerQuiz('quiz_1', 'nb-1', { q1: ['a'] }, 12);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(sent(session)).toEqual([
      {
        action: 'quiz_answer',
        quiz_id: 'quiz_1',
        session_id: 'nb-1',
        answers: { q1: ['a'] },
        seconds: 12
      }
    ]);
    session.kernel.comm.receive({ type: 'quiz_graded', quiz_id: 'quiz_1', score: 1 });
    const result = await graded;
    expect([result.id, result.score]).toEqual(['quiz_1', 1]);
  });
});

describe('when the comm goes away', () => {
  async function waiting(): Promise<Promise<unknown>[]> {
    const submission = { selections: ['safe'], custom_input: '', cancelled: false };
    const pending = [
      chat.ask('What is rank?'),
      chat.answer('ask_1', 'nb-1', submission),
      chat.answerQuiz('quiz_1', 'nb-1', { q1: ['a'] }, 3)
    ];
    await new Promise(resolve => setTimeout(resolve, 0));
    for (const p of pending) {
      expect(await state(p)).toBe('pending');
    }
    return pending;
  }

  it('fails every waiting ask, answer and quiz answer when the comm closes', async () => {
    const pending = await waiting();
    session.kernel.comm.close();
    for (const p of pending) {
      expect(await state(p)).toBe('rejected'); // settled now, not left waiting forever
      await expect(p).rejects.toThrow('The kernel went away');
    }
    expect(chat.status).toContain('Disconnected');
  });

  it('fails them too when the kernel changes, and reconnects a chat that was shown', async () => {
    const pending = await waiting();
    const before = session.kernel;
    session.session.kernel = new FakeKernel();
    session.kernelChanged.emit(null);
    for (const p of pending) {
      expect(await state(p)).toBe('rejected'); // settled now, not left waiting forever
      await expect(p).rejects.toThrow('The kernel went away');
    }
    expect(chat.turns).toEqual([]);
    await chat.connect();
    expect(session.kernel).not.toBe(before);
    expect(session.kernel.comms.map(c => c.opened)).toEqual([true]);
  });

  it('stops listening to the session once disposed', async () => {
    await chat.connect();
    const comm = session.kernel.comm;
    chat.dispose();
    expect(comm.isDisposed).toBe(true);
    session.session.kernel = new FakeKernel();
    session.kernelChanged.emit(null);
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(session.kernel.executed).toEqual([]);
  });
});

describe('regenerate and delete', () => {
  it('sends regenerate, resolves when the new turn started, rejects a refusal in words', async () => {
    const first = chat.regenerate('turn-2');
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(sent(session)).toEqual([{ action: 'regenerate', turn_id: 'turn-2' }]);
    session.kernel.comm.receive({ type: 'asked', turn_id: 'turn-3' });
    expect(await state(first)).toBe('resolved');

    const second = chat.regenerate('turn-3');
    await new Promise(resolve => setTimeout(resolve, 0));
    const message = 'A turn of this conversation is still running';
    session.kernel.comm.receive({ type: 'error', action: 'regenerate', message, code: 'busy' });
    await expect(second).rejects.toThrow(message);
  });

  it('sends delete with the conversation', async () => {
    await chat.deleteConversation('nb-1');
    expect(sent(session)).toEqual([{ action: 'delete', conversation: 'nb-1' }]);
  });
});
