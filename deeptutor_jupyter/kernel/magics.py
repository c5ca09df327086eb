"""``%tutor`` and ``%%tutor``: thin magics that hand a turn to the runtime and return at once."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import CFloat, CInt, Unicode

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.kernel.tutor import KernelTutor, ensure_loop, has_event_loop

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.runtime.orchestrator import Turn
    from deeptutor_jupyter.store.db import PendingRow

# flag -> (settings field, takes a value)
_FLAGS: dict[str, tuple[str, bool]] = {
    "--model": ("model", True),
    "--provider": ("provider", True),
    "--base-url": ("base_url", True),
    "--max-rounds": ("max_rounds", True),
    "--max-tokens": ("max_tokens", True),
    "--temperature": ("temperature", True),
    "--timeout": ("timeout", True),
    "--language": ("language", True),
    "--new": ("new", False),
    "--cell": ("cell", True),
    "--kb": ("kb", True),
    "--tools": ("tools", True),
    "--no-tools": ("no_tools", False),
    "--attach": ("attach", True),
}
_FLAG_RE = re.compile(r"\s*(--[a-z-]+)(?:=(\S+))?")

ASKING = """\
  %tutor <question>              ask in this notebook's conversation
  %%tutor [flags]                the cell body is the question
  %tutor --new <question>        start a fresh conversation
  %tutor --cell N <question>     ask about the cell shown as [N] (its source, result, error)
  %tutor --kb NAME <question>    answer from a knowledge base, with citations
  %tutor --attach a.ipynb,b.pdf <question>   read these files first, then answer"""

FLAGS_AND_SETTINGS = """\
Flags (they override every other settings layer for this turn):
  --model NAME  --provider NAME  --base-url URL  --max-rounds N  --max-tokens N
  --temperature T  --timeout SECONDS  --language en|zh  --tools a,b  --no-tools  --new

Settings come from, lowest first: defaults, $DEEPTUTOR_HOME/settings.toml, the environment
(DEEPTUTOR_PROVIDER, DEEPTUTOR_MODEL, DEEPTUTOR_BASE_URL, DEEPTUTOR_API_KEY, OPENAI_API_KEY,
DEEPSEEK_API_KEY, ANTHROPIC_API_KEY, ...), c.TutorMagics.* in ipython_config.py, then these
flags. With no model configured, %tutor shows a setup card."""


class UsageError(DeepTutorError, ValueError):
    code = "usage"


@dataclass
class Parsed:
    command: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    new: bool = False
    question: str = ""
    args: set[str] = field(default_factory=set)
    switches: set[str] = field(default_factory=set)
    rest: str = ""  # the line after a free command word


@dataclass
class Call:
    """One ``%tutor`` line as a command handler receives it."""

    parsed: Parsed
    resolved: ResolvedSettings | None = None  # None for commands with settings=False
    cell_index: str | None = None
    turn_flags: dict[str, str] = field(default_factory=dict)  # --kb, --tools, --attach


Handler = Callable[["TutorMagics", Call], None]


@dataclass(frozen=True)
class Command:
    """A ``%tutor <word>`` subcommand: its help line and what runs it.

    ``args`` are the words it accepts after its name; any other word makes the line a question
    (``%tutor stop being so verbose`` asks). A ``free`` command parses the rest itself.
    ``settings=False`` runs before settings are resolved; ``strict_flags=False`` runs even when a
    flag has a bad value (``config`` is how the learner finds out which).
    """

    name: str
    usage: str
    summary: str
    run: Handler
    args: frozenset[str] = frozenset()
    free: bool = False
    settings: bool = True
    strict_flags: bool = True


# The table the magic dispatches through; help lists it in this order.
COMMANDS: dict[str, Command] = {}


def command(name: str, usage: str, summary: str, **options: Any) -> Callable[[Handler], Handler]:
    """Register a handler as ``%tutor <name>``: ``@command("review", "review", "...")``."""

    def register_handler(run: Handler) -> Handler:
        args = frozenset(options.pop("args", ()))
        COMMANDS[name] = Command(name, usage, summary, run, args=args, **options)
        _refresh_docstring()
        return run

    return register_handler


def help_text() -> str:
    """The one help text: ``%tutor help``, ``%tutor``, ``%tutor?`` and usage errors show it."""
    width = max(len(c.usage) for c in COMMANDS.values()) + 9
    lines = [f"  {('%tutor ' + c.usage).ljust(width)} {c.summary}" for c in COMMANDS.values()]
    return (
        "%tutor: ask the AI tutor; the answer streams into this cell's output.\n\n"
        f"Ask:\n{ASKING}\n\nCommands:\n" + "\n".join(lines) + f"\n\n{FLAGS_AND_SETTINGS}\n"
    )


def parse(line: str, cell: str | None) -> Parsed:
    """Leading ``--flags``, then a command word or the question; questions may contain dashes."""
    parsed = Parsed()
    rest = line
    while True:
        m = _FLAG_RE.match(rest)
        if not m:
            break
        flag, inline = m.group(1), m.group(2)
        if flag not in _FLAGS:
            raise UsageError(f"Unknown flag {flag}.\n\n{help_text()}")
        name, takes_value = _FLAGS[flag]
        rest = rest[m.end() :]
        if not takes_value:
            if name == "new":
                parsed.new = True
            else:
                parsed.switches.add(name)
            continue
        if inline is None:
            vm = re.match(r"\s*(\S+)", rest)
            if not vm:
                raise UsageError(f"{flag} needs a value.\n\n{help_text()}")
            inline, rest = vm.group(1), rest[vm.end() :]
        parsed.flags[name] = inline
    rest = rest.strip()
    words = rest.split()
    found = COMMANDS.get(words[0]) if cell is None and words else None
    if found is not None and found.free:
        parsed.command, parsed.rest = found.name, rest[len(words[0]) :].strip()
        return parsed
    if found is not None and set(words[1:]) <= found.args:
        parsed.command, parsed.args = found.name, set(words[1:])
        return parsed
    parsed.question = (cell if cell is not None else rest).strip()
    if cell is not None and rest:
        raise UsageError(f"Unexpected text after the flags of %%tutor: {rest!r}.\n\n{help_text()}")
    return parsed


@magics_class
class TutorMagics(Magics):
    """The traitlets settings layer: ``c.TutorMagics.model = "..."`` in ipython_config.py."""

    provider = Unicode(None, allow_none=True, config=True, help="Provider name, e.g. openai.")
    model = Unicode(None, allow_none=True, config=True, help="Model name, e.g. gpt-4o-mini.")
    base_url = Unicode(None, allow_none=True, config=True, help="OpenAI-compatible base URL.")
    max_rounds = CInt(None, allow_none=True, config=True, help="Exploration rounds per turn.")
    max_tokens = CInt(None, allow_none=True, config=True, help="Output token limit per round.")
    temperature = CFloat(None, allow_none=True, config=True, help="Sampling temperature.")
    timeout = CFloat(None, allow_none=True, config=True, help="Read timeout in seconds.")
    language = Unicode(None, allow_none=True, config=True, help="Interface language: en or zh.")

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.state = KernelTutor.for_shell(shell, self._resolve)
        self.state.on_resumed = _show_resumed
        # In[N] -> its error, for --cell N; the tutor's own dict, so the panel's reads see it
        self.cell_errors: dict[int, str] = self.state.cell_errors

    def _trait_settings(self) -> dict[str, Any]:
        names = ("provider", "model", "base_url", "max_rounds", "max_tokens", "temperature")
        return {n: getattr(self, n) for n in (*names, "timeout", "language")}

    def _resolve(self, flags: dict[str, Any]) -> ResolvedSettings:
        from deeptutor_jupyter.config import resolve_settings

        return resolve_settings(traits=self._trait_settings(), flags=flags)

    @line_cell_magic
    def tutor(self, line: str, cell: str | None = None) -> None:
        # The docstring is help_text(), set by _refresh_docstring, so %tutor? shows it all.
        from deeptutor_jupyter.kernel import warm

        # A question typed while the first turn's imports warm up waits for those its request
        # needs; the view's it imports itself once the request is sent (kernel/start.py).
        warm.wait(sending=True)
        from deeptutor_jupyter.kernel.display import show_markdown
        from deeptutor_jupyter.store.db import StoreError

        try:
            self._dispatch(line, cell)
        except StoreError as exc:
            # A full disk or a read-only home: a card in words, never a traceback in the cell.
            show_markdown(f"⚠ **Not started.** {exc}")
        finally:
            if notice := self.state.session.take_notice():
                show_markdown(notice)

    def _dispatch(self, line: str, cell: str | None) -> None:
        from deeptutor_jupyter.kernel.display import show_markdown

        try:
            parsed = parse(line, cell)
        except UsageError as exc:
            show_markdown(f"```\n{exc}\n```")
            return
        call = Call(parsed, cell_index=parsed.flags.pop("cell", None))
        call.turn_flags = {
            k: parsed.flags.pop(k) for k in ("kb", "tools", "attach") if k in parsed.flags
        }
        if not parsed.command and not parsed.question and call.cell_index is None:
            parsed.command = "help"
        found = COMMANDS.get(parsed.command or "")
        if found is not None and not found.settings:
            found.run(self, call)
            return
        call.resolved = self._resolve(parsed.flags)
        # A flag asked for this turn: a value that does not validate must not silently fall back.
        bad_flags = [p for p in call.resolved.problems if p.startswith("--")]
        if bad_flags and (found is None or found.strict_flags):
            lines = "\n".join(bad_flags)
            show_markdown(f"```\nNot started, a flag has a bad value:\n{lines}\n\n{help_text()}```")
            return
        self.state.session.language = call.resolved.settings.language
        (found.run if found is not None else _ask)(self, call)


def _refresh_docstring() -> None:
    TutorMagics.tutor.__doc__ = help_text()


# the commands ------------------------------------------------------------------------------
@command("help", "help", "this help (also %tutor? and %tutor alone)", settings=False)
def _help(_magics: TutorMagics, _call: Call) -> None:
    from deeptutor_jupyter.kernel.display import show_markdown

    show_markdown(f"```\n{help_text()}```")


@command(
    "config",
    "config",
    "the effective settings and where each came from (keys masked)",
    strict_flags=False,
)
def _config(_magics: TutorMagics, call: Call) -> None:
    from deeptutor_jupyter.config import render_settings_markdown
    from deeptutor_jupyter.kernel.display import show_markdown
    from deeptutor_jupyter.learning.sandbox import sandbox_status

    assert call.resolved is not None
    status = sandbox_status(call.resolved.settings.sandbox)  # says why when code is not run
    show_markdown(render_settings_markdown(call.resolved) + "\n" + status + "\n")


@command("course", "course", "your course's packs (on a JupyterHub with a course service)")
def _course(_magics: TutorMagics, call: Call) -> None:
    from deeptutor_jupyter.kernel.display import show_markdown
    from deeptutor_jupyter.runtime.course import course_status

    assert call.resolved is not None
    show_markdown(course_status(call.resolved.settings.home))


@command("mcp", "mcp", "the MCP servers of settings.toml: state and tools (docs/mcp.md)")
def _mcp(magics: TutorMagics, call: Call) -> None:
    from deeptutor_jupyter.kernel.display import show_markdown
    from deeptutor_jupyter.tools.mcp.servers import status_markdown

    assert call.resolved is not None
    session = magics.state.session
    session.open(call.resolved)
    session.refresh_mcp(call.resolved.settings.home)  # settings.toml may have changed
    show_markdown(status_markdown(session.mcp))


@command("budget", "budget", "your course's tutor budget: used today, left, when it resets")
def _budget(_magics: TutorMagics, _call: Call) -> None:
    from deeptutor_jupyter.kernel.display import show_markdown
    from deeptutor_jupyter.runtime.course import budget_status

    show_markdown(budget_status())


@command("why", "why", "explain the last error of this kernel")
def _why(magics: TutorMagics, call: Call) -> None:
    _ask(magics, call)


@command("stop", "stop", "stop every running turn of this kernel")
def _stop(magics: TutorMagics, _call: Call) -> None:
    for turn in magics.state.session.running_turns():
        turn.cancel("Stopped with %tutor stop.")


@command(
    "pending",
    "pending [--all]",
    "the questions waiting for your answer; --all: of every notebook",
    args={"--all"},
)
def _pending(magics: TutorMagics, call: Call) -> None:
    resolved, tutor = call.resolved, magics.state
    assert resolved is not None
    if not resolved.ready and not tutor.session.is_open:
        from deeptutor_jupyter.kernel.start import show_setup

        show_setup(resolved)
        return
    from deeptutor_jupyter.kernel.interactions import show_pending

    ensure_loop()
    tutor.open(resolved)
    # Every kind of pause: questions, quizzes and reviews, each answerable from here.
    show_pending(tutor, all_sessions="--all" in call.parsed.args)


@command(
    "autoload",
    "autoload [on|off]",
    "load the tutor in every new kernel of this IPython profile (off by default)",
    args={"on", "off"},
    settings=False,
)
def _autoload(magics: TutorMagics, call: Call) -> None:
    from deeptutor_jupyter.kernel.autoload import autoload
    from deeptutor_jupyter.kernel.display import show_markdown

    args = call.parsed.args
    if args == {"on", "off"}:
        show_markdown("`%tutor autoload on` or `%tutor autoload off`, not both.")
        return
    turn_on = True if "on" in args else False if "off" in args else None
    show_markdown(autoload(magics.shell, turn_on))


@command(
    "demo",
    "demo [off]",
    "try the tutor offline on a scripted stand-in (not a real model); off: back to your model",
    args={"off"},
    settings=False,
)
def _demo(magics: TutorMagics, call: Call) -> None:
    from deeptutor_jupyter.kernel.demo import demo_for
    from deeptutor_jupyter.kernel.display import show_markdown

    demo = demo_for(magics.state)
    show_markdown(demo.stop() if "off" in call.parsed.args else demo.start())


def _free_command(name: str) -> Handler:
    def run(magics: TutorMagics, call: Call) -> None:
        from deeptutor_jupyter.kernel import commands
        from deeptutor_jupyter.kernel.display import show_markdown

        assert call.resolved is not None
        ensure_loop()
        handler = commands.memory_command if name == "memory" else commands.kb_command
        try:
            handler(magics.state, call.resolved, call.parsed.rest)
        except ValueError as exc:
            show_markdown(f"⚠ {exc}")

    return run


command(
    "memory", "memory ...", "what the tutor remembers about you (%tutor memory help)", free=True
)(_free_command("memory"))
command("kb", "kb ...", "course knowledge bases (%tutor kb help)", free=True)(_free_command("kb"))


def _learning_command(name: str) -> Handler:
    def run(magics: TutorMagics, call: Call) -> None:
        from deeptutor_jupyter.kernel import learn_commands as learn
        from deeptutor_jupyter.kernel.display import show_markdown

        assert call.resolved is not None
        ensure_loop()
        try:
            if name == "learn":
                learn.learn_command(magics.state, call.resolved, call.parsed.rest)
            elif name == "review":
                every = "--all" in call.parsed.args
                learn.review_command(magics.state, call.resolved, every=every)
            else:
                learn.progress_command(magics.state, call.resolved)
        except ValueError as exc:
            show_markdown(f"⚠ {exc}")

    return run


command(
    "learn",
    "learn [<topic>] [--kb NAME]",
    "a learning path with quizzes and gates; no topic: continue (%tutor learn help)",
    free=True,
)(_learning_command("learn"))
command(
    "review",
    "review [--all]",
    "the review cards that are due, as a quiz; --all: any card",
    args={"--all"},
)(_learning_command("review"))
command("progress", "progress", "mastery per objective, the review forecast, what to do next")(
    _learning_command("progress")
)


@command(
    "solve",
    "solve <problem>",
    "solve a problem step by step: a plan you can follow, each step checked (docs/solve.md)",
    free=True,
)
def _solve(magics: TutorMagics, call: Call) -> None:
    from deeptutor_jupyter.kernel.display import show_markdown

    if not call.parsed.rest:
        show_markdown("Give the problem to solve: `%tutor solve What is 17*23 + 9?`")
        return
    call.parsed.question = call.parsed.rest
    _ask(magics, call, capability="solve")


@command(
    "book",
    "book <topic> [--kb NAME]",
    "a study notebook from the course material, built next to this one (docs/book.md)",
    free=True,
)
def _book(magics: TutorMagics, call: Call) -> None:
    from deeptutor_jupyter.kernel.book_command import book_command

    assert call.resolved is not None
    ensure_loop()
    book_command(
        magics.state, call.resolved, call.parsed.rest, flags_list(call.turn_flags.get("kb")) or []
    )


def _ask(magics: TutorMagics, call: Call, capability: str = "chat") -> None:
    """A question (or ``why``, or a ``solve``): compose the message and start a turn."""
    from deeptutor_jupyter.kernel.display import show_markdown

    parsed, resolved = call.parsed, call.resolved
    assert resolved is not None
    try:
        question = compose_question(magics.shell, parsed, call.cell_index, magics.cell_errors)
    except UsageError as exc:
        show_markdown(str(exc))
        return
    if not has_event_loop():
        from deeptutor_jupyter.kernel.terminal import run_in_terminal

        run_in_terminal(magics.state, resolved, question, new=parsed.new, capability=capability)
        return
    from deeptutor_jupyter.kernel.start import ask_in_cell

    tools = flags_list(call.turn_flags.get("tools"))
    ask_in_cell(
        magics.state,
        resolved,
        question,
        new=parsed.new,
        kbs=flags_list(call.turn_flags.get("kb")) or [],
        user_tools=tuple(tools) if tools is not None else None,
        no_tools="no_tools" in parsed.switches,
        attachments=[Path(p).expanduser() for p in flags_list(call.turn_flags.get("attach")) or []],
        capability=capability,
        shown=shown_words(parsed, call.cell_index),
    )


def flags_list(value: str | None) -> list[str] | None:
    """``a,b`` -> ["a", "b"]; None when the flag was not given."""
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def compose_question(
    shell: Any, parsed: Parsed, cell_index: str | None, cell_errors: dict[int, str] | None = None
) -> str:
    """The message a turn sends: the learner's words plus what ``why`` and ``--cell`` point at."""
    from deeptutor_jupyter.kernel import notebook_context as nbc

    question = parsed.question
    if parsed.command == "why":
        error = nbc.last_error_text(shell)
        if error is None:
            raise UsageError(
                "No error has been raised in this kernel yet, so there is nothing to explain."
            )
        question = (
            "I got this error in my notebook. Explain what went wrong and how I can fix it.\n\n"
            f"```\n{error}\n```"
        )
    if cell_index is not None:
        try:
            number = int(cell_index.strip("[]"))
            cell = nbc.cell_from_history(shell, number, cell_errors)
        except ValueError:
            raise UsageError(
                f"--cell takes the number shown left of a cell, like 3 for [3]; got {cell_index!r}."
            ) from None
        except LookupError as exc:
            raise UsageError(str(exc)) from None
        question = f"{cell}\n\n{question or 'Can you help me with this cell?'}"
    return question


def shown_words(parsed: Parsed, cell_index: str | None) -> str | None:
    """What the learner asked, in their words, when :func:`compose_question` sent more (the
    traceback, the cell's code): the panel's bubble and the conversation's name."""
    if parsed.command == "why":
        words = parsed.question or "Explain my last error."
    elif cell_index is not None:
        words = parsed.question or "Can you help me with this cell?"
    else:
        return None
    return f"{words} (cell [{cell_index.strip('[]')}])" if cell_index is not None else words


_QUESTION_LINE = re.compile(r"^(\s*)%tutor[ \t]+(\S.*?\?)[ \t]*$")


def keep_question_marks(lines: list[str]) -> list[str]:
    """Run ``%tutor What is X?`` as a question, not as IPython's ``X?`` help lookup.

    IPython rewrites any line ending in ``?`` into ``%pinfo`` before magics see it, and most
    questions end that way. This cleanup transformer runs first; ``%tutor?`` (no space) is left
    alone so it still shows the help.
    """
    out = []
    for line in lines:
        m = _QUESTION_LINE.match(line.rstrip("\n"))
        if m is None:
            out.append(line)
            continue
        call = f"{m.group(1)}get_ipython().run_line_magic('tutor', {m.group(2)!r})"
        out.append(call + ("\n" if line.endswith("\n") else ""))
    return out


def _cell_id_hook(tutor: KernelTutor) -> Any:
    def pre_run_cell(info: Any) -> None:
        tutor.last_cell_id = getattr(info, "cell_id", None)

    return pre_run_cell


KEPT_ERRORS = 100  # the errors of the latest cells; older ones are rarely asked about


def _cell_error_hook(magics: TutorMagics) -> Any:
    """Remember which cell raised what, so ``--cell N`` can show the error of ``[N]``."""

    def post_run_cell(result: Any) -> None:
        number = getattr(result, "execution_count", None)
        error = getattr(result, "error_in_exec", None)
        if not isinstance(number, int) or error is None:
            return
        from deeptutor_jupyter.kernel.notebook_context import error_of_run

        magics.cell_errors[number] = error_of_run(magics.shell, error)
        while len(magics.cell_errors) > KEPT_ERRORS:
            del magics.cell_errors[min(magics.cell_errors)]

    return post_run_cell


_registered: dict[int, tuple[TutorMagics, list[tuple[str, Any]]]] = {}


def register(ipython: Any) -> None:
    magics = TutorMagics(shell=ipython)
    ipython.register_magics(magics)
    hooks = [
        ("pre_run_cell", _cell_id_hook(magics.state)),
        ("post_run_cell", _cell_error_hook(magics)),
    ]
    for event, hook in hooks:
        ipython.events.register(event, hook)
    if keep_question_marks not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(keep_question_marks)
    _registered[id(ipython)] = (magics, hooks)
    sidebar_comm().register(ipython, lambda: current_tutor(ipython))
    from deeptutor_jupyter.kernel import cells_comm  # JupyterLab's answers to cell inserts

    cells_comm.register(ipython)
    if has_event_loop():  # a kernel: warm the first turn's imports once this cell is done
        asyncio.get_running_loop().call_soon(start_warming)


def start_warming() -> None:
    """Import in the background what the first turn needs (kernel/warm.py), and then make the
    SSL context an https model will need."""
    from deeptutor_jupyter.kernel import warm

    warm.start(warm.MODULES, after=_ssl_context)


def _ssl_context() -> None:
    from deeptutor_jupyter.providers._http import shared_ssl_context

    shared_ssl_context()


def unregister(ipython: Any) -> None:
    entry = _registered.pop(id(ipython), None)
    if entry is None:
        return
    magics, hooks = entry
    for event, hook in hooks:
        ipython.events.unregister(event, hook)
    sidebar_comm().unregister(ipython)
    from deeptutor_jupyter.kernel import cells_comm

    cells_comm.unregister(ipython)
    if keep_question_marks in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(keep_question_marks)
    for turn in magics.state.session.running_turns():
        turn.cancel("The extension was unloaded.")


def sidebar_comm() -> Any:
    """The sidebar's comm (kernel/comm.py); imported here, not at module load."""
    from deeptutor_jupyter.kernel import comm

    return comm


def current_tutor(ipython: Any = None) -> KernelTutor | None:
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    entry = _registered.get(id(ipython))
    return entry[0].state if entry else None


def _show_resumed(tutor: KernelTutor, turn: Turn, row: PendingRow) -> None:
    from deeptutor_jupyter.kernel.start import show_resumed  # the views load on first use

    show_resumed(tutor, turn, row)
