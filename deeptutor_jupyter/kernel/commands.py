"""``%tutor memory ...`` and ``%tutor kb ...``: the learner's memory and the course's material.

Long work (indexing, consolidation) runs off the kernel's main loop step, with a widget that
reports progress and the outcome, so the cell returns at once like every ``%tutor`` cell.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import MagicArgumentParser

from deeptutor_jupyter.kernel.display import show_markdown, widget_bundle
from deeptutor_jupyter.words import plural

if TYPE_CHECKING:
    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor

MEMORY_USAGE = """\
```
%tutor memory                         open the memory workbench (what the tutor knows, with sources)
%tutor memory import <notebook|folder>  rebuild traces from saved notebooks (idempotent)
%tutor memory consolidate [--mode update|audit|dedup|merge] [--doc L3/profile]
%tutor memory export [file.zip]       write all memory to a zip
%tutor memory forget --all            delete all memory (asks for confirmation)
```"""

KB_USAGE = """\
```
%tutor kb add <name> <folder-or-files>...   index course material (md, txt, py, ipynb, pdf)
%tutor kb refresh <name> [path]...          re-index what changed (only these paths, if given)
%tutor kb list                              the knowledge bases and their sizes
%tutor kb remove <name>                     delete a knowledge base's index (not the files)
%tutor --kb <name> <question>               answer with that material, citing it
```"""

EMPTY_KB_LIST = (
    "No knowledge bases yet. Add your course material with `%tutor kb add NAME FOLDER`, "
    "then ask with `%tutor --kb NAME` followed by your question."
)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"Could not read the arguments: {exc}") from None


def _verbs(prog: str) -> tuple[MagicArgumentParser, Any]:
    # IPython's argparse for magics: a bad line raises UsageError instead of exiting the kernel.
    parser = MagicArgumentParser(prog=prog)  # type: ignore[no-untyped-call]
    verbs = parser.add_subparsers(dest="verb", metavar="command", parser_class=MagicArgumentParser)
    return parser, verbs


def _document(value: str) -> str:
    if "/" not in value:
        raise argparse.ArgumentTypeError(f"{value!r} is not LAYER/KEY, e.g. L3/profile")
    return value


def memory_parser() -> MagicArgumentParser:
    """``%tutor memory [import PATH | export [FILE] | forget --all | consolidate ... | help]``."""
    from deeptutor_jupyter.memory.consolidate import MODES  # only when %tutor memory runs

    parser, verbs = _verbs("%tutor memory")
    verbs.add_parser("import").add_argument("path")
    verbs.add_parser("export").add_argument("file", nargs="?")
    verbs.add_parser("forget").add_argument("--all", action="store_true", required=True)
    consolidate = verbs.add_parser("consolidate")
    consolidate.add_argument("--mode", choices=MODES, default="update")
    consolidate.add_argument("--doc", type=_document, default="L3/profile")
    verbs.add_parser("help")
    return parser


def kb_parser() -> MagicArgumentParser:
    """``%tutor kb [list | add NAME PATH... | refresh NAME | remove NAME | help]``."""
    parser, verbs = _verbs("%tutor kb")
    verbs.add_parser("list")
    add = verbs.add_parser("add")
    add.add_argument("name")
    add.add_argument("paths", nargs="+")
    refresh = verbs.add_parser("refresh")
    refresh.add_argument("name")
    refresh.add_argument("paths", nargs="*")
    verbs.add_parser("remove").add_argument("name")
    verbs.add_parser("help")
    return parser


def read_args(parser: MagicArgumentParser, rest: str) -> argparse.Namespace:
    """The line after ``%tutor memory``/``kb``; ValueError says what is wrong with it."""
    try:
        return parser.parse_args(_split(rest))
    except UsageError as exc:
        raise ValueError(f"{exc}.") from None


def memory_command(tutor: KernelTutor, resolved: ResolvedSettings, rest: str) -> None:
    from IPython.display import display

    try:
        args = read_args(memory_parser(), rest)
    except ValueError as exc:
        show_markdown(f"⚠ {exc}\n\n{MEMORY_USAGE}")
        return
    tutor.session.open(resolved)
    store = tutor.session.memory
    assert store is not None
    language = resolved.settings.language
    if args.verb is None:
        from deeptutor_jupyter.kernel.widgets.memory_workbench import MemoryWorkbench

        display(
            MemoryWorkbench(
                store,
                make_model=lambda: tutor.session.model_for(resolved),
                language=language,
                settings=lambda: tutor.session.resolve({}),
            )
        )  # type: ignore[no-untyped-call]
        return
    if args.verb == "import":
        result = store.import_notebooks(Path(args.path).expanduser())
        show_markdown(
            f"Imported **{plural(result.added, 'trace', 'traces')}** from "
            f"{plural(result.notebooks, 'notebook', 'notebooks')}; "
            f"{result.skipped_duplicates} already known."
            + "".join(f"\n- ⚠ {e}" for e in result.errors)
        )
    elif args.verb == "export":
        dest = Path(args.file) if args.file else Path.cwd() / "deeptutor-memory.zip"
        show_markdown(f"Memory exported to `{store.export_zip(dest)}`.")
    elif args.verb == "forget":
        from deeptutor_jupyter.kernel.widgets.forget_card import ForgetCard

        card = ForgetCard(store, language=language)
        # With a display id the receipt replaces the saved text once the learner answers.
        card.display_handle = display(card, display_id=True)  # type: ignore[no-untyped-call]
    elif args.verb == "consolidate":
        _consolidate(tutor, resolved, args.mode, args.doc)
    else:
        show_markdown(MEMORY_USAGE)


def _consolidate(tutor: KernelTutor, resolved: ResolvedSettings, mode: str, doc: str) -> None:
    import ipywidgets as widgets
    from IPython.display import display

    layer, key = doc.split("/", 1)
    if mode != "merge" and not resolved.ready:
        show_markdown("Consolidation needs a model: " + "; ".join(resolved.missing()))
        return
    status = widgets.HTML(f"Consolidating <code>{html.escape(doc)}</code> ({mode})…")
    status.add_class("dt-consolidate")
    handle = display(  # type: ignore[no-untyped-call]
        widget_bundle(status, f"Consolidating `{doc}` ({mode})…"), raw=True, display_id=True
    )

    def say(markdown: str) -> None:
        """The widget shows the HTML; the saved notebook keeps the same words as Markdown."""
        handle.update(widget_bundle(status, markdown), raw=True)

    async def run() -> None:
        from deeptutor_jupyter.memory.consolidate import RunBusyError, consolidate

        assert tutor.session.memory is not None
        model = None if mode == "merge" else tutor.session.model_for(resolved)
        try:
            result = await consolidate(tutor.session.memory, model, layer=layer, key=key, mode=mode)  # type: ignore[arg-type]
        except RunBusyError:
            status.value = f"<code>{html.escape(doc)}</code> is busy: another consolidation runs."
            say(f"`{doc}` is busy: another consolidation runs.")
            return
        except Exception as exc:
            status.value = f"⚠ Consolidation failed: {html.escape(str(exc))}"
            say(f"⚠ Consolidation failed: {exc}")
            return
        rejected = "".join(
            f"<li>{html.escape(str(op))}: {html.escape(str(reason))}</li>"
            for op, reason in result.rejected
        )
        status.value = (
            f"<b>{mode}</b> on <code>{html.escape(doc)}</code>: "
            f"{plural(len(result.ops_applied), 'change', 'changes')} applied in "
            f"{plural(result.passes, 'pass', 'passes')}."
            + (f"<pre>{html.escape(result.diff)}</pre>" if result.diff else "")
            + (f"<p>Rejected:</p><ul>{rejected}</ul>" if rejected else "")
        )
        applied = plural(len(result.ops_applied), "change", "changes")
        passes = plural(result.passes, "pass", "passes")
        say(f"**{mode}** on `{doc}`: {applied} applied in {passes}.")

    tutor.background(run())


def kb_command(tutor: KernelTutor, resolved: ResolvedSettings, rest: str) -> None:
    from deeptutor_jupyter.knowledge import list_kbs, remove_kb

    home = resolved.settings.home
    try:
        args = read_args(kb_parser(), rest)
    except ValueError as exc:
        show_markdown(f"⚠ {exc}\n\n{KB_USAGE}")
        return
    try:
        if args.verb == "list":
            kbs = list_kbs(home)
            if not kbs:
                show_markdown(EMPTY_KB_LIST)
                return
            rows = [
                f"| {kb['name']} | {kb.get('files', '?')} | {kb.get('chunks', '?')} |" for kb in kbs
            ]
            show_markdown("| name | files | chunks |\n|---|---|---|\n" + "\n".join(rows))
        elif args.verb == "remove":
            remove_kb(home, args.name)
            show_markdown(f"Removed the knowledge base **{args.name}** (your files are untouched).")
        elif args.verb in ("add", "refresh"):
            paths = [Path(p).expanduser() for p in getattr(args, "paths", [])]
            _index(tutor, home, args.name, paths, refresh=args.verb == "refresh")
        else:
            show_markdown(KB_USAGE)
    except (ValueError, LookupError) as exc:
        show_markdown(f"⚠ {exc}")


PROGRESS_INTERVAL = 0.25  # seconds between progress updates: a few a second, whatever the files


def _index(
    tutor: KernelTutor, home: Path, name: str, paths: list[Path], *, refresh: bool = False
) -> None:
    """Index in a worker thread; a progress bar follows it through thread-safe callbacks.

    ``refresh`` with ``paths``: only those files or folders changed (one that is gone is
    dropped from the index), so only they are looked at.

    Progress is coalesced: the worker reports after every file (50,000 files, 50,000 calls),
    but the bar is updated at most every ``PROGRESS_INTERVAL``. The output carries a text
    fallback, updated at the end, so a notebook saved without widget state still says what
    was indexed.
    """
    import time

    import ipywidgets as widgets
    from IPython.display import display

    from deeptutor_jupyter.kernel.display import widget_bundle
    from deeptutor_jupyter.knowledge import KnowledgeBase

    missing = [str(p) for p in paths if not p.exists()]
    if missing and not refresh:
        show_markdown(f"⚠ Not found: {', '.join(missing)}")
        return
    kb = KnowledgeBase(home, name)
    bar = widgets.IntProgress(value=0, min=0, max=1, description="Indexing")
    label = widgets.HTML()
    box = widgets.VBox([bar, label])
    box.add_class("dt-kb-progress")
    verb = "Adding to" if paths else "Refreshing"
    handle = display(  # type: ignore[no-untyped-call]
        widget_bundle(box, f"{verb} the knowledge base **{name}**…"), raw=True, display_id=True
    )
    loop = asyncio.get_running_loop()
    last = [0.0]

    def progress(done: int, total: int, current: str) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_INTERVAL and 0 < done < total:
            return  # the last call of a run always goes through
        last[0] = now

        def show() -> None:
            bar.max = max(total, 1)
            bar.value = done
            label.value = html.escape(current)

        loop.call_soon_threadsafe(show)

    def finish(markdown: str) -> None:
        if handle is not None:
            handle.update(widget_bundle(box, markdown), raw=True)

    async def run() -> None:
        try:
            if refresh:
                report: Any = await asyncio.to_thread(
                    lambda: kb.refresh(progress, paths=paths or None)
                )
            else:
                report = await asyncio.to_thread(kb.add_sources, paths, progress)
        except Exception as exc:
            bar.bar_style = "danger"
            label.value = f"⚠ {html.escape(str(exc))}"
            finish(f"⚠ {exc}")
            return
        bar.value = bar.max
        bar.bar_style = "success"
        errors = "".join(f"<br>⚠ {html.escape(e)}" for e in report.errors)
        label.value = f"<b>{html.escape(name)}</b>: {html.escape(report.summary())}{errors}"
        problems = "".join(f"\n- ⚠ {e}" for e in report.errors)
        finish(f"**{name}**: {report.summary()}{problems}")

    tutor.background(run())
