"""``%tutor book <topic>``: build a study notebook next to this one, with progress by stage and a
Stop button; running the same line again resumes (or, once built, updates what changed).

The build runs on the kernel's loop as a background task (its model calls are async, its
sandbox runs in threads), so the cell returns at once like every ``%tutor`` cell. The output
ends as a static bundle saying what was written, kept and dropped: the saved notebook reads the
same without widgets.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deeptutor_jupyter.kernel.commands import read_args
from deeptutor_jupyter.kernel.display import show_markdown, static_bundle, widget_bundle

if TYPE_CHECKING:
    from IPython.core.magic_arguments import MagicArgumentParser

    from deeptutor_jupyter.config import ResolvedSettings
    from deeptutor_jupyter.kernel.tutor import KernelTutor

BOOK_USAGE = """\
```
%tutor book <topic> [--kb NAME] [--from conversation|FILE] [--level beginner|intermediate|advanced]
                   [--language en|zh]
```
A study notebook on the topic from the course material (`--kb NAME`, this notebook's
conversation `--from conversation`, files `--from notes.pdf`; each repeatable), written next to
this notebook: chapters citing the sources, worked examples that were run, exercises tagged
`exercise` with hidden tests, a short quiz per chapter. Run the same line again to resume a
stopped build or to update the chapters whose sources changed (docs/book.md)."""


def book_parser() -> MagicArgumentParser:
    from IPython.core.magic_arguments import MagicArgumentParser

    parser = MagicArgumentParser(prog="%tutor book")  # type: ignore[no-untyped-call]
    parser.add_argument("topic", nargs="+")
    parser.add_argument("--kb", action="append", default=[])
    parser.add_argument("--from", dest="sources", action="append", default=[])
    parser.add_argument("--level", default="beginner")
    parser.add_argument("--language", default=None)
    return parser


def book_command(tutor: KernelTutor, resolved: ResolvedSettings, rest: str, kbs: list[str]) -> None:
    from deeptutor_jupyter.book import BuildState, open_state
    from deeptutor_jupyter.book.model import slug
    from deeptutor_jupyter.kernel.notebook_context import notebook_path
    from deeptutor_jupyter.knowledge import list_kbs
    from deeptutor_jupyter.runtime.policy_gate import PolicyGate

    try:
        args = read_args(book_parser(), rest)
    except ValueError as exc:
        show_markdown(f"⚠ {exc}\n\n{BOOK_USAGE}")
        return
    if not resolved.ready:
        show_markdown("Building a book needs a model: " + "; ".join(resolved.missing()))
        return
    s = resolved.settings
    wanted_kbs = [*kbs, *args.kb]
    known = {kb["name"] for kb in list_kbs(s.home)}
    unknown = [name for name in wanted_kbs if name not in known]
    if unknown:
        show_markdown(f"⚠ No knowledge base named {', '.join(unknown)} (`%tutor kb list`).")
        return
    decision = PolicyGate().gate(s.home, tutor.workspace, ())
    if decision.mode == "off":
        show_markdown(f"⚠ {decision.refusal()}")
        return
    topic = " ".join(args.topic)
    paths = [Path(v).expanduser() for v in args.sources if v != "conversation"]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        show_markdown(f"⚠ Not found: {', '.join(missing)}")
        return
    if args.sources:  # the book's own knowledge base, built by own_sources before the build
        wanted_kbs.append(f"book-{slug(topic)}")
    here = notebook_path()
    folder = here.parent if here is not None else tutor.workspace
    wanted = BuildState(
        topic=topic,
        level=args.level,
        language=args.language or s.language,
        kbs=wanted_kbs,
        hints=decision.mode == "hints",  # the book then holds no solutions
        notebook=str((folder / f"{slug(topic)}.ipynb").resolve()),
    )
    tutor.session.open(resolved)
    conversation = list(tutor.session.history) if "conversation" in args.sources else None

    def prepare() -> None:
        from deeptutor_jupyter.book import own_sources

        own_sources(s.home, topic, conversation=conversation, paths=paths)

    _start(tutor, resolved, open_state(s.home, wanted), prepare)


def _start(
    tutor: KernelTutor, resolved: ResolvedSettings, state: Any, prepare: Callable[[], None]
) -> None:
    import ipywidgets as widgets
    from IPython.display import display

    from deeptutor_jupyter.book import STAGES, BookError, build_book
    from deeptutor_jupyter.cells import CellError
    from deeptutor_jupyter.kernel.cells_comm import LabFrontend

    name = Path(state.notebook).name
    label = widgets.HTML(f"Building <code>{html.escape(name)}</code>…")
    stop = widgets.Button(description="Stop", button_style="warning")
    box = widgets.VBox([label, stop])
    box.add_class("dt-book")
    handle = display(  # type: ignore[no-untyped-call]
        widget_bundle(box, f"Building `{name}`…"), raw=True, display_id=True
    )

    def progress(stage: str, what: str) -> None:
        step = STAGES.index(stage) + 1 if stage in STAGES else 0
        label.value = f"<b>{step}/{len(STAGES)} {html.escape(stage)}</b>: {html.escape(what)}"

    def finish(markdown: str) -> None:
        box.close()
        handle.update(static_bundle(markdown), raw=True)

    async def run() -> None:
        model = tutor.session.model_for(resolved)
        home = resolved.settings.home
        has_kernel = getattr(tutor.shell, "kernel", None) is not None
        lab = LabFrontend(state.notebook) if has_kernel else None
        try:
            progress("sources", "indexing this conversation and the files given")
            await asyncio.to_thread(prepare)
            report = await build_book(home, state, model, progress=progress, frontend=lab)
        except asyncio.CancelledError:
            finish(f"Stopped building `{name}`; run the same line again to resume.")
            return
        except (BookError, CellError, ValueError, OSError) as exc:  # an unreadable --from file
            finish(f"⚠ {exc}")
            return
        except Exception as exc:  # a bug: said in the cell, never a silent task
            finish(f"⚠ The book could not be built: {type(exc).__name__}: {exc}")
            return
        finish(report.markdown())

    task = tutor.background(run())
    loop = asyncio.get_running_loop()
    # A click may arrive on a subshell thread: the task is cancelled on its loop.
    stop.on_click(lambda _b: loop.call_soon_threadsafe(task.cancel))
