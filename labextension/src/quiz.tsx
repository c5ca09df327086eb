/**
 * A make_quiz form in the panel (the rules are in quizform.ts). Submit sends `quiz_answer` over
 * the comm; the kernel grades it once, through the same coordinator as the cell's form, and the
 * graded result becomes the tool result of the same make_quiz call. Then a read-only receipt.
 */
import * as React from 'react';

import { __ } from './i18n';
import {
  QuizAnswers,
  QuizQuestion,
  blankQuestion,
  choose,
  initialAnswers,
  quizProblem,
  quizQuestions,
  quizReceipt,
  submission
} from './quizform';
import { QuizRequired, QuizResolved } from './schema';
import { reasonText } from './errors';
import { CodeEditorHandle, mountCodeEditor } from './codeeditor';

export interface QuizCardProps {
  quiz: QuizRequired;
  /** The turn's `quiz_resolved`, once there is one: the card becomes the receipt. */
  resolved: QuizResolved | null;
  /** Resolves with the grade; rejects with the refusal in words (the answers stay). */
  onSubmit: (answers: QuizAnswers, seconds: number) => Promise<QuizResolved>;
  /** How a prompt is shown (the panel renders Markdown and LaTeX); plain text by default. */
  renderText?: (text: string) => React.ReactNode;
  /** Where the quiz's turn goes on once graded, when that is a notebook's cell (Pending tab). */
  continuesIn?: string;
}

export function QuizCard(props: QuizCardProps): React.ReactElement {
  const { quiz } = props;
  const questions = React.useMemo(() => quizQuestions(quiz), [quiz]);
  const [answers, setAnswers] = React.useState<QuizAnswers>(() => initialAnswers(questions));
  const [error, setError] = React.useState<string | null>(null);
  const [busy, setBusy] = React.useState(false);
  /** Submit with blanks asks first: this is the question shown, with Go back / Submit anyway. */
  const [asking, setAsking] = React.useState<string | null>(null);
  const [graded, setGraded] = React.useState<QuizResolved | null>(null);
  const opened = React.useRef(Date.now());
  const resolved = props.resolved ?? graded;
  const render = props.renderText ?? ((text: string) => <span>{text}</span>);

  const head = (
    <div className="jp-DeepTutorQuiz-head">
      <div className="jp-DeepTutorQuiz-title">{__('Quiz: %1', quiz.title)}</div>
      {quiz.objective ? <div className="jp-DeepTutorQuiz-objective">{quiz.objective}</div> : null}
    </div>
  );

  if (resolved) {
    const receipt = quizReceipt(quiz, resolved);
    return (
      <div className="jp-DeepTutorQuiz jp-mod-settled" data-quiz-id={quiz.id}>
        {head}
        {receipt.closed ? (
          <div className="jp-DeepTutorQuiz-closed">{receipt.closed}</div>
        ) : (
          <div className="jp-DeepTutorQuiz-receipt">
            <div className="jp-DeepTutorQuiz-score">{receipt.score}</div>
            {receipt.lines.map(line => (
              <div
                key={line.id}
                className={`jp-DeepTutorQuiz-result ${
                  !line.answered ? 'jp-mod-blank' : line.correct ? 'jp-mod-right' : 'jp-mod-wrong'
                }`}
              >
                <div>
                  <span className="jp-DeepTutorQuiz-mark">
                    {!line.answered ? '\u2013' : line.correct ? '\u2713' : '\u2717'}
                  </span>{' '}
                  {render(line.prompt)}
                </div>
                <div>
                  {__('Your answer:')} {line.code ? <pre>{line.given}</pre> : <i>{line.given}</i>}
                </div>
                {line.feedback ? (
                  <div className="jp-DeepTutorQuiz-feedback">{line.feedback}</div>
                ) : null}
              </div>
            ))}
          </div>
        )}
        {props.continuesIn && !receipt.closed ? (
          <div className="jp-DeepTutorQuiz-where">
            {__('The turn continues in %1.', props.continuesIn)}
          </div>
        ) : null}
      </div>
    );
  }

  const problem = quizProblem(questions, answers);
  const submit = async (confirmed: boolean) => {
    const blank = blankQuestion(questions, answers);
    if (blank && !confirmed && asking === null) {
      setAsking(blank);
      return;
    }
    setAsking(null);
    setBusy(true);
    setError(null);
    try {
      const seconds = (Date.now() - opened.current) / 1000;
      setGraded(await props.onSubmit(submission(questions, answers), seconds));
    } catch (reason) {
      setError(reasonText(reason));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="jp-DeepTutorQuiz" data-quiz-id={quiz.id}>
      {head}
      {questions.map((q, i) => (
        <QuestionField
          key={q.id}
          number={i + 1}
          question={q}
          quizId={quiz.id}
          render={render}
          value={answers[q.id]}
          disabled={busy}
          onChange={value => setAnswers({ ...answers, [q.id]: value })}
          onChoose={(option, checked) => setAnswers(choose(answers, q, option, checked))}
        />
      ))}
      {error ? <div className="jp-DeepTutorQuiz-error">{error}</div> : null}
      {asking ? (
        <div className="jp-DeepTutorQuiz-confirm" role="alertdialog">
          <span className="jp-DeepTutorQuiz-confirmText">
            {asking} {__('Blanks are graded as not answered.')}
          </span>
          <button className="jp-Button jp-mod-styled jp-mod-reject" onClick={() => setAsking(null)}>
            {__('Go back')}
          </button>
          <button className="jp-Button jp-mod-styled jp-mod-warn" onClick={() => void submit(true)}>
            {__('Submit anyway')}
          </button>
        </div>
      ) : null}
      <div className="jp-DeepTutorQuiz-buttons">
        <button
          className="jp-Button jp-mod-styled jp-mod-accept"
          disabled={busy || problem !== null}
          title={problem ?? ''}
          onClick={() => void submit(false)}
        >
          {busy ? __('Grading\u2026') : __('Submit answers')}
        </button>
      </div>
    </div>
  );
}

function QuestionField(props: {
  number: number;
  question: QuizQuestion;
  quizId: string;
  render: (text: string) => React.ReactNode;
  value: string[] | string | undefined;
  disabled: boolean;
  onChange: (value: string) => void;
  onChoose: (option: string, checked: boolean) => void;
}): React.ReactElement {
  const { question: q } = props;
  const text = typeof props.value === 'string' ? props.value : '';
  const chosen = Array.isArray(props.value) ? props.value : [];
  let field: React.ReactElement;
  if (q.kind === 'choice') {
    field = (
      <div className="jp-DeepTutorQuiz-options" role={q.multiple ? 'group' : 'radiogroup'}>
        {q.options.map(option => (
          <label key={option.id} className="jp-DeepTutorQuiz-option">
            <input
              type={q.multiple ? 'checkbox' : 'radio'}
              name={`quiz-${props.quizId}-${q.id}`}
              checked={chosen.includes(option.id)}
              disabled={props.disabled}
              onChange={e => props.onChoose(option.id, e.target.checked)}
            />
            <span className="jp-DeepTutorQuiz-optionLabel">{props.render(option.label)}</span>
          </label>
        ))}
      </div>
    );
  } else if (q.kind === 'code') {
    field = <CodeField text={text} disabled={props.disabled} onChange={props.onChange} />;
  } else {
    const hint =
      q.kind === 'numeric'
        ? q.unit
          ? __('A number, in %1', q.unit)
          : __('A number')
        : __('Your answer');
    field = (
      <input
        className="jp-DeepTutorQuiz-input jp-mod-styled"
        type="text"
        placeholder={hint}
        value={text}
        disabled={props.disabled}
        onChange={e => props.onChange(e.target.value)}
      />
    );
  }
  return (
    <div className={`jp-DeepTutorQuiz-question jp-mod-${q.kind}`} data-question-id={q.id}>
      <div className="jp-DeepTutorQuiz-prompt">
        <span>{props.number}.</span>
        {props.render(q.prompt)}
      </div>
      {field}
    </div>
  );
}

/** A code answer: JupyterLab's editor (codeeditor.ts), or a plain textarea (Tab indents, keys.ts)
 * when JupyterLab gave no editor services. The editor owns its text while mounted; the form
 * keeps a copy through `onChange`, as it does for a textarea. (The editor stays editable while
 * grading: the answers were sent, and a refusal keeps what is typed meanwhile.) */
function CodeField(props: {
  text: string;
  disabled: boolean;
  onChange: (value: string) => void;
}): React.ReactElement {
  const host = React.useRef<HTMLDivElement>(null);
  const editor = React.useRef<CodeEditorHandle | null>(null);
  const onChange = React.useRef(props.onChange);
  onChange.current = props.onChange;
  const [plain, setPlain] = React.useState(false);
  React.useEffect(() => {
    if (!host.current) {
      return;
    }
    editor.current = mountCodeEditor(host.current, props.text, text => onChange.current(text));
    if (!editor.current) {
      setPlain(true);
      return;
    }
    return () => {
      editor.current?.dispose();
      editor.current = null;
    };
  }, []); // mounted once: later text comes from the editor itself
  if (plain) {
    return (
      <textarea
        className="jp-DeepTutorQuiz-code jp-mod-styled"
        spellCheck={false}
        rows={Math.min(12, Math.max(4, props.text.split('\n').length + 1))}
        value={props.text}
        disabled={props.disabled}
        onChange={e => props.onChange(e.target.value)}
      />
    );
  }
  return <div className="jp-DeepTutorQuiz-code jp-DeepTutorQuiz-editor" ref={host} />;
}
