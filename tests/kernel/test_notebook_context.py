"""Reading the notebook file: a damaged one falls back to the input history, never crashes."""

from __future__ import annotations

import asyncio
import codecs
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from deeptutor_jupyter.kernel import describe as describing
from deeptutor_jupyter.kernel import notebook_context as nbc
from deeptutor_jupyter.kernel.describe import describe
from deeptutor_jupyter.kernel.notebook_context import (
    InspectArgs,
    InspectVariableTool,
    notebook_cells,
    preview,
    render_cells,
)
from deeptutor_jupyter.tools.base import ToolContext


@pytest.mark.parametrize("content", ["[1, 2]", '{"cells": 3}', "not json", '{"cells": [5]}'])
def test_a_damaged_notebook_file_falls_back_to_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
):
    path = tmp_path / "lesson.ipynb"
    path.write_text(content)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    shell = SimpleNamespace(user_ns={"In": ["", "x = 1", "print(x)"]})
    cells, origin = notebook_cells(shell)
    if content == '{"cells": [5]}':
        assert cells == [] and "lesson.ipynb" in origin
    else:
        assert [c["source"] for c in cells] == ["x = 1", "print(x)"]
        assert origin == "this kernel's input history"


def test_rendering_is_bounded():
    cells = [{"type": "code", "source": "x" * 5000, "tags": ["exercise"]}] * 20
    text = render_cells(cells, 0, None)
    assert "tags: exercise" in text and "more chars" in text and len(text) < 21000


def test_a_preview_is_never_a_full_dump():
    info = preview(list(range(100_000)))
    assert info["len"] == 100_000 and len(info["preview"]) < 1600


class Counted:
    """An item whose repr and ordering are counted: the preview must touch only a few."""

    reprs = 0
    compares = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        Counted.reprs += 1
        return f"C{self.n}"

    def __lt__(self, other: object) -> bool:
        Counted.compares += 1
        return isinstance(other, Counted) and self.n < other.n

    def __hash__(self) -> int:
        return self.n


class MyList(list):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    "make",
    [
        lambda items: items,
        lambda items: MyList(items),
        lambda items: tuple(items),
        lambda items: set(items),
        lambda items: {item: 1 for item in items},
        lambda items: {"nested": [items]},
    ],
    ids=["list", "list-subclass", "tuple", "set", "dict", "nested"],
)
def test_a_preview_never_builds_the_full_repr_of_a_container(make):
    value = make([Counted(i) for i in range(20_000)])
    Counted.reprs = Counted.compares = 0
    info = preview(value)
    assert Counted.reprs <= 50 and Counted.compares == 0
    assert len(info["preview"]) < 1600 and "..." in info["preview"]


def test_sizes_come_before_the_preview_and_huge_values_stay_small():
    assert preview(b"x" * 10_000_000)["len"] == 10_000_000
    assert len(preview(b"x" * 10_000_000)["preview"]) < 400
    assert "bits" in preview(10**100_000)["preview"]


class Spins:
    """A __repr__ that spins until released (or gives up after a while, so no test can hang)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def __repr__(self) -> str:
        self.calls += 1
        deadline = time.monotonic() + 10
        while not self.release.is_set() and time.monotonic() < deadline:
            pass
        return "Spins()"


@pytest.fixture
def on_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no child can be forked (not Linux), describing runs on a daemon thread."""
    monkeypatch.setattr(describing, "CAN_FORK", False)


async def test_on_a_thread_a_slow_repr_runs_off_the_loop_and_stop_cancels_at_once(on_thread):
    spins = Spins()
    shell = SimpleNamespace(user_ns={"spins": spins})
    tool = InspectVariableTool(shell)
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path("."))
    task = asyncio.create_task(tool.run(InspectArgs(name="spins"), ctx))
    ticks = 0
    while spins.calls == 0:  # the loop keeps running while the repr spins on another thread
        await asyncio.sleep(0.01)
        ticks += 1
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert shell.user_ns["spins"] is spins  # the learner's variable survives
    spins.release.set()


async def test_on_a_thread_a_repr_that_never_ends_gives_a_result_in_words(
    on_thread, monkeypatch: pytest.MonkeyPatch
):
    spins = Spins()
    threads_before = threading.active_count()
    info = await describe(spins, timeout=0.2)
    assert info is None
    # The abandoned thread is told to stop at its next bytecode, without the release.
    for _ in range(500):
        if threading.active_count() <= threads_before:
            break
        await asyncio.sleep(0.01)
    assert threading.active_count() <= threads_before and not spins.release.is_set()
    monkeypatch.setattr(nbc, "INSPECT_SECONDS", 0.2)
    tool = InspectVariableTool(SimpleNamespace(user_ns={"spins": spins}))
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path("."))
    result = await tool.run(InspectArgs(name="spins"), ctx)
    assert result.is_error and "took longer than 0.2 s" in result.content
    assert "Spins" in result.content and "timed_out" in str(result.data)


def children_of_this_process() -> list[int]:
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


class SpinsForever:
    """Marks a file when its __repr__ starts, then spins until killed."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __repr__(self) -> str:
        self.mark.write_text("started")
        while True:
            pass


class HoldsTheGil:
    """A __repr__ inside one C call (sum over a range): no bytecode runs, so no other thread
    of the process gets the GIL until it returns, seconds later."""

    def __repr__(self) -> str:
        return str(sum(range(300_000_000)))


class ChangesState:
    def __init__(self) -> None:
        self.seen = 0

    def __repr__(self) -> str:
        self.seen += 1
        print("printed by a repr")
        return f"ChangesState(seen={self.seen})"


needs_fork = pytest.mark.skipif(not describing.CAN_FORK, reason="forking is Linux only")


@needs_fork
async def test_a_spinning_repr_is_killed_at_stop_and_leaves_no_process(tmp_path: Path):
    mark = tmp_path / "started"
    shell = SimpleNamespace(user_ns={"spins": SpinsForever(mark)})
    tool = InspectVariableTool(shell)
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path("."))
    task = asyncio.create_task(tool.run(InspectArgs(name="spins"), ctx))
    for _ in range(1000):  # the loop runs while the child spins
        if mark.exists():
            break
        await asyncio.sleep(0.01)
    assert mark.exists() and not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert children_of_this_process() == []


@needs_fork
async def test_a_repr_that_never_ends_is_killed_after_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(nbc, "INSPECT_SECONDS", 0.3)
    tool = InspectVariableTool(SimpleNamespace(user_ns={"spins": SpinsForever(tmp_path / "m")}))
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path("."))
    result = await tool.run(InspectArgs(name="spins"), ctx)
    assert result.is_error and "took longer than 0.3 s" in result.content
    assert "SpinsForever" in result.content and "timed_out" in str(result.data)
    assert children_of_this_process() == []


@needs_fork
async def test_c_code_holding_the_gil_does_not_hold_the_kernel_loop():
    # Issue 23: a C __repr__ holding the GIL froze the kernel for 33 s, timeout or not; a
    # thread cannot be bounded there, a child process can.
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        assert await describe(HoldsTheGil(), timeout=0.6) is None
    finally:
        ticker.cancel()
    assert ticks >= 15  # ~60 on a quiet machine; 0 while the GIL is held
    assert children_of_this_process() == []


@needs_fork
async def test_a_repr_changes_nothing_in_the_kernel_and_prints_nothing(
    capsys: pytest.CaptureFixture[str],
):
    value = ChangesState()
    info = await describe(value)
    assert info is not None and info["preview"] == "ChangesState(seen=1)"
    assert value.seen == 0  # its side effects stayed in the child
    assert "printed by a repr" not in capsys.readouterr().out
    info = await describe(value)
    assert info is not None and info["preview"] == "ChangesState(seen=1)"


@needs_fork
async def test_a_repr_that_ends_the_process_is_an_error_not_a_hang():
    class Exits:
        def __repr__(self) -> str:
            os._exit(3)

    with pytest.raises(RuntimeError, match="ended without a result"):
        await describe(Exits())
    assert children_of_this_process() == []


class SlowMeta(type):
    """A metaclass whose properties are slow: none of them may run while inspecting."""

    calls = 0

    @property
    def __module__(cls):  # type: ignore[override]
        SlowMeta.calls += 1
        time.sleep(0.3)
        return "slow"

    @property
    def shape(cls):
        SlowMeta.calls += 1
        time.sleep(0.3)
        return (1,)


class Learners(metaclass=SlowMeta):
    pass


@pytest.mark.parametrize("which", ["instance", "class"])
async def test_metaclass_properties_never_run_when_inspecting(
    monkeypatch: pytest.MonkeyPatch, which: str
):
    # Issue 23: the type's name was read through the metaclass, on the kernel loop, after the
    # timeout: a slow property there froze the kernel.
    monkeypatch.setattr(SlowMeta, "calls", 0)
    value = Learners() if which == "instance" else Learners
    tool = InspectVariableTool(SimpleNamespace(user_ns={"v": value}))
    ctx = ToolContext(session_id="s", turn_id="t", workspace=Path("."))
    result = await tool.run(InspectArgs(name="v"), ctx)
    assert SlowMeta.calls == 0 and not result.is_error
    assert "test_notebook_context.Learners" in result.content
    assert nbc.type_name(value).endswith(("SlowMeta", "Learners"))
    assert SlowMeta.calls == 0


@pytest.mark.parametrize(
    "encoding",
    ["utf-16", "utf-16-be", "utf-8-sig", "utf-32", "latin-1", "cp1252", "utf-8"],
)
def test_tutor_md_in_any_editor_encoding_is_read(tmp_path: Path, encoding: str):
    text = "Réponds en français, étape par étape."
    if encoding == "utf-16-be":
        data = codecs.BOM_UTF16_BE + text.encode("utf-16-be")
    else:
        data = text.encode(encoding)
    (tmp_path / "TUTOR.md").write_bytes(data)
    blocks = nbc.tutor_md_blocks(tmp_path)
    assert text in blocks[-1]


def test_a_traceback_keeps_the_learners_frames_and_names_the_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import json
    import traceback

    from deeptutor_jupyter.kernel.notebook_context import learner_traceback

    monkeypatch.chdir(tmp_path)
    (tmp_path / "helpers.py").write_text("import json\n\ndef load(t):\n    return json.loads(t)\n")
    cell = tmp_path / "ipykernel_1" / "123.py"  # where ipykernel keeps a cell's source
    cell.parent.mkdir()
    cell.write_text(
        "import helpers\ntry:\n    helpers.load('{')\nexcept ValueError as e:\n"
        "    raise KeyError('no config') from e\n"
    )
    code = compile(cell.read_text(), str(cell), "exec")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        exec(code, {})
    except KeyError as exc:
        error = traceback.TracebackException.from_exception(exc)
    shell = SimpleNamespace(compile=SimpleNamespace(_filename_map={str(cell): 7}))
    text = learner_traceback(error, shell)
    assert text.index("JSONDecodeError") < text.index("direct cause") < text.index("KeyError")
    assert "Cell In[7], line 3\n    helpers.load('{')" in text
    assert "File helpers.py, line 4, in load\n    return json.loads(t)" in text
    assert "frames inside json" in text and "Cell In[7], line 5" in text
    assert str(tmp_path) not in text and json.__file__ not in text


def test_a_file_beside_pythons_lib_folder_is_the_learners() -> None:
    import sys

    from deeptutor_jupyter.kernel.notebook_context import _library_name

    lib = Path(sys.prefix) / "lib"
    assert _library_name(str(lib / "somewhere" / "x.py")) == "Python"
    # Same first characters, another folder: /opt/conda/library/ is not /opt/conda/lib/.
    assert _library_name(str(Path(sys.prefix) / "library" / "homework.py")) == ""
