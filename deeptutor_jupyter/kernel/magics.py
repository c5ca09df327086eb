"""``%tutor`` and ``%%tutor``: thin magics that hand a turn to the runtime and return at once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import CFloat, CInt, Unicode

from deeptutor_jupyter.kernel.tutor import KernelTutor, ensure_loop, has_event_loop, notebook_key

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings

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
# Commands whose whole rest of the line is theirs to parse.
_FREE_COMMANDS = ("memory", "kb")
_FLAG_RE = re.compile(r"\s*(--[a-z-]+)(?:=(\S+))?")
# command -> the arguments it takes; anything else after the word makes the line a question
_COMMANDS: dict[str, set[str]] = {
    "config": set(),
    "stop": set(),
    "help": set(),
    "pending": {"--all"},
    "why": set(),
}

USAGE = """\
Usage:
  %tutor <question>              ask in this notebook's conversation
  %%tutor [flags]                the cell body is the question
  %tutor --new <question>        start a fresh conversation
  %tutor why                     explain the last error of this kernel
  %tutor --cell N <question>     ask about cell N of this notebook
  %tutor config                  show the effective settings and where each came from
  %tutor stop                    stop every running turn of this kernel
  %tutor pending [--all]         show the questions waiting for your answer (--all: every notebook)
  %tutor memory ...              what the tutor remembers about you (%tutor memory help)
  %tutor kb ...                  course knowledge bases (%tutor kb help)
  %tutor --kb NAME <question>    answer from a knowledge base, with citations
  %tutor --attach a.ipynb,b.pdf <question>   read these files first, then answer
Flags: --model NAME  --provider NAME  --base-url URL  --max-rounds N  --max-tokens N
       --temperature T  --timeout SECONDS  --language en|zh  --tools a,b  --no-tools
"""


class UsageError(ValueError):
    pass


@dataclass
class Parsed:
    command: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    new: bool = False
    question: str = ""
    args: set[str] = field(default_factory=set)
    switches: set[str] = field(default_factory=set)
    rest: str = ""  # the line after a free command word


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
            raise UsageError(f"Unknown flag {flag}.\n\n{USAGE}")
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
                raise UsageError(f"{flag} needs a value.\n\n{USAGE}")
            inline, rest = vm.group(1), rest[vm.end() :]
        parsed.flags[name] = inline
    rest = rest.strip()
    words = rest.split()
    if cell is None and words and words[0] in _FREE_COMMANDS:
        parsed.command, parsed.rest = words[0], rest[len(words[0]) :].strip()
        return parsed
    if cell is None and words and words[0] in _COMMANDS:
        args = set(words[1:])
        if args <= _COMMANDS[words[0]]:
            parsed.command, parsed.args = words[0], args
            return parsed
    parsed.question = (cell if cell is not None else rest).strip()
    if cell is not None and rest:
        raise UsageError(f"Unexpected text after the flags of %%tutor: {rest!r}.\n\n{USAGE}")
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
        self.state = KernelTutor(notebook=notebook_key(shell.user_ns if shell else None))
        self.state.resolve = self._resolve
        self.state.shell = shell

    def _trait_settings(self) -> dict[str, Any]:
        names = ("provider", "model", "base_url", "max_rounds", "max_tokens", "temperature")
        return {n: getattr(self, n) for n in (*names, "timeout", "language")}

    def _resolve(self, flags: dict[str, Any]) -> ResolvedSettings:
        from deeptutor_jupyter.config import resolve_settings

        return resolve_settings(traits=self._trait_settings(), flags=flags)

    @line_cell_magic
    def tutor(self, line: str, cell: str | None = None) -> None:
        """Ask the AI tutor; the answer streams into this cell's output.

        %tutor What is an eigenvector, intuitively?
        %tutor --new Let's start over: what is a derivative?

        %%tutor --model deepseek-chat
        Here is my attempt at the proof... where does it go wrong?

        The cell finishes at once and the answer streams in below it. Follow-up questions in the
        same notebook continue the conversation; --new starts a fresh one. The Stop button
        cancels a running answer, and running the cell again replaces its previous answer.

        Commands:
          %tutor config    the effective settings and where each came from (keys masked)
          %tutor stop      stop every running turn of this kernel
          %tutor pending   show again the questions waiting for your answer (--all: every notebook);
                           after a kernel restart, answering one continues its turn

        Flags (they override every other settings layer for this turn):
          --model NAME  --provider NAME  --base-url URL  --max-rounds N  --max-tokens N
          --temperature T  --timeout SECONDS  --language en|zh  --new

        Settings come from, lowest first: defaults, $DEEPTUTOR_HOME/settings.toml, the
        environment (DEEPTUTOR_PROVIDER, DEEPTUTOR_MODEL, DEEPTUTOR_BASE_URL, DEEPTUTOR_API_KEY,
        OPENAI_API_KEY, DEEPSEEK_API_KEY, ANTHROPIC_API_KEY, ...), c.TutorMagics.* in
        ipython_config.py, then these flags. With no model configured, %tutor shows a setup card.
        """
        from deeptutor_jupyter.kernel.display import show_markdown

        try:
            parsed = parse(line, cell)
        except UsageError as exc:
            show_markdown(f"```\n{exc}\n```")
            return
        cell_index = parsed.flags.pop("cell", None)
        turn_flags = {
            k: parsed.flags.pop(k) for k in ("kb", "tools", "attach") if k in parsed.flags
        }
        if parsed.command == "help" or (
            not parsed.command and not parsed.question and cell_index is None
        ):
            show_markdown(f"```\n{USAGE}```")
            return
        from deeptutor_jupyter.config import render_settings_markdown, resolve_settings

        resolved = resolve_settings(traits=self._trait_settings(), flags=parsed.flags)
        if parsed.command == "config":
            show_markdown(render_settings_markdown(resolved))
            return
        # A flag asked for this turn: a value that does not validate must not silently fall back.
        if bad_flags := [p for p in resolved.problems if p.startswith("--")]:
            lines = "\n".join(bad_flags)
            show_markdown(f"```\nNot started, a flag has a bad value:\n{lines}\n\n{USAGE}```")
            return
        if parsed.command == "stop":
            for turn in self.state.running_turns():
                turn.cancel("Stopped with %tutor stop.")
            return
        self.state.language = resolved.settings.language
        if parsed.command in ("memory", "kb"):
            from deeptutor_jupyter.kernel import commands

            ensure_loop()
            run = commands.memory_command if parsed.command == "memory" else commands.kb_command
            try:
                run(self.state, resolved, parsed.rest)
            except ValueError as exc:
                show_markdown(f"⚠ {exc}")
            return
        if parsed.command == "pending":
            if not resolved.ready and self.state.store is None:
                from deeptutor_jupyter.kernel.start import show_setup

                show_setup(resolved)
                return
            from deeptutor_jupyter.kernel.interactions import show_pending

            ensure_loop()
            self.state.open(resolved)
            show_pending(self.state, all_sessions="--all" in parsed.args)
            return
        try:
            question = compose_question(self.shell, parsed, cell_index)
        except UsageError as exc:
            show_markdown(str(exc))
            return
        if not has_event_loop():
            from deeptutor_jupyter.kernel.terminal import run_in_terminal

            run_in_terminal(self.state, resolved, question, new=parsed.new)
            return
        from deeptutor_jupyter.kernel.start import start_turn

        tools = flags_list(turn_flags.get("tools"))
        start_turn(
            self.state,
            resolved,
            question,
            new=parsed.new,
            kbs=flags_list(turn_flags.get("kb")) or [],
            user_tools=tuple(tools) if tools is not None else None,
            no_tools="no_tools" in parsed.switches,
            attachments=[Path(p).expanduser() for p in flags_list(turn_flags.get("attach")) or []],
        )


def flags_list(value: str | None) -> list[str] | None:
    """``a,b`` -> ["a", "b"]; None when the flag was not given."""
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def compose_question(shell: Any, parsed: Parsed, cell_index: str | None) -> str:
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
        cells, origin = nbc.notebook_cells(shell)
        try:
            index = int(cell_index)
            cell = cells[index]
        except (ValueError, IndexError):
            raise UsageError(
                f"There is no cell {cell_index} in {origin} ({len(cells)} cells, counted from 0)."
            ) from None
        question = (
            f"About cell {index} of my notebook ({cell['type']}):\n\n"
            f"```\n{cell['source']}\n```\n\n{question or 'Can you help me with this cell?'}"
        )
    return question


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


_registered: dict[int, tuple[TutorMagics, Any]] = {}


def register(ipython: Any) -> None:
    magics = TutorMagics(shell=ipython)
    ipython.register_magics(magics)
    hook = _cell_id_hook(magics.state)
    ipython.events.register("pre_run_cell", hook)
    if keep_question_marks not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(keep_question_marks)
    _registered[id(ipython)] = (magics, hook)
    sidebar_comm().register(ipython, lambda: current_tutor(ipython))


def unregister(ipython: Any) -> None:
    entry = _registered.pop(id(ipython), None)
    if entry is None:
        return
    magics, hook = entry
    sidebar_comm().unregister(ipython)
    ipython.events.unregister("pre_run_cell", hook)
    if keep_question_marks in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(keep_question_marks)
    for turn in magics.state.running_turns():
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
