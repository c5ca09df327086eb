"""Warming the first turn's imports in a thread (kernel/warm.py): waiting, failures, locks."""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deeptutor_jupyter.kernel.warm import MODULES, THREAD_NAME, VIEW_MODULES, Warmer

SLOW = """
import threading, time
time.sleep({delay})
IMPORTED_BY = threading.current_thread().name
COMPLETE = True
"""


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    """A folder on sys.path for made-up modules; they are forgotten afterwards."""
    sys.path.insert(0, str(tmp_path))
    before = set(sys.modules)
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in set(sys.modules) - before:
            if name.startswith("warm_probe"):
                del sys.modules[name]


def slow_module(folder: Path, name: str, delay: float) -> str:
    (folder / f"{name}.py").write_text(SLOW.format(delay=delay), encoding="utf-8")
    return name


def test_wait_returns_once_the_thread_has_imported(modules: Path) -> None:
    name = slow_module(modules, "warm_probe_a", 0.3)
    warmer = Warmer()
    assert warmer.start((name,))
    assert warmer.warming()
    assert warmer.wait()
    warmer.request_sent()
    assert not warmer.warming()
    probe = sys.modules[name]
    assert probe.IMPORTED_BY == THREAD_NAME  # imported by the thread, not by the waiter
    assert warmer.start((name,)) is False  # once per warmer


def test_a_question_that_waited_is_not_raced_by_the_after_step(modules: Path) -> None:
    # Run All: the question waited for the imports and then runs at once; the slow ``after``
    # value (an SSL context) is left to it rather than built beside it. Nobody waiting (the
    # learner is still typing): the thread builds it.
    for name, asked in (("warm_probe_e", True), ("warm_probe_f", False)):
        built = threading.Event()
        warmer = Warmer()
        warmer.start((slow_module(modules, name, 0.2),), after=built.set)
        if asked:
            assert warmer.wait()
            warmer.request_sent()
        else:
            while warmer.warming():
                time.sleep(0.01)
        assert warmer._thread is not None
        warmer._thread.join(5)
        assert built.is_set() is not asked, name


def test_a_question_waits_for_its_request_modules_and_the_view_is_left_to_it(
    modules: Path,
) -> None:
    # Run All (issue 28): the question waits for what its model request needs and no longer;
    # the thread then stops before the view's modules (the turn imports them once its request
    # is sent) instead of importing them beside the question. Nobody sending: all imported.
    for suffix, sending in (("g", True), ("h", False)):
        request = slow_module(modules, f"warm_probe_request_{suffix}", 0.2)
        view = slow_module(modules, f"warm_probe_view_{suffix}", 0.0)
        warmer = Warmer(view=(view,))
        warmer.start((view, request))  # the view's modules go second, whatever the order
        if sending:
            assert warmer.wait(sending=True)
            assert request in sys.modules
            warmer.request_sent()
        assert warmer.finished()
        assert (view in sys.modules) is not sending, suffix


GC_PROBE = "import gc, time\ntime.sleep({delay})\nENABLED = gc.isenabled()\n"


@pytest.fixture
def collecting() -> Iterator[None]:
    """Garbage collection on again after the test, whatever it left."""
    try:
        yield
    finally:
        gc.enable()


def test_no_garbage_collection_while_a_request_waits_for_its_imports(
    modules: Path, collecting: None
) -> None:
    # Issue 28: each collection while importing traverses the new modules' objects again
    # (~11 ms of a Run All's first request). Paused for the request's imports; on again
    # before the view's (nobody waiting), once the question's request is sent, or after a
    # bound (a question that never sends).
    for case in ("typing", "sends", "never sends"):
        request, view = f"warm_probe_gc_request_{case[0]}", f"warm_probe_gc_view_{case[0]}"
        # the request's module slow enough that the question surely waits for it
        (modules / f"{request}.py").write_text(GC_PROBE.format(delay=0.3), encoding="utf-8")
        (modules / f"{view}.py").write_text(GC_PROBE.format(delay=0), encoding="utf-8")
        warmer = Warmer(view=(view,), gc_pause=0.2 if case == "never sends" else 30)
        warmer.start((request, view))
        if case == "typing":
            assert warmer.finished(5)
            assert sys.modules[view].ENABLED is True
        else:
            assert warmer.wait(sending=True)
            assert not gc.isenabled()  # nor while the question builds its request
            if case == "sends":
                warmer.request_sent()
            assert warmer.finished(5)
        assert sys.modules[request].ENABLED is False, case
        assert gc.isenabled(), case


def test_the_request_sent_turns_collection_on_at_once(modules: Path, collecting: None) -> None:
    # A question that waited (not as the sender: the thread goes on to the view's modules)
    # sends its request while the thread still imports: collection is on from then, not
    # once the thread is done with the view's modules.
    request = slow_module(modules, "warm_probe_gc_sent_request", 0.5)
    view = slow_module(modules, "warm_probe_gc_sent_view", 1.0)
    warmer = Warmer(view=(view,), gc_pause=30)
    warmer.start((request, view))
    assert warmer.wait()
    assert not gc.isenabled()
    warmer.request_sent()
    assert gc.isenabled()
    assert warmer.warming()  # the thread is still in the view's module
    assert warmer.finished(5)


def test_a_learner_who_turned_collection_off_keeps_it_off(modules: Path, collecting: None) -> None:
    gc.disable()  # the learner's own choice, before the warming
    warmer = Warmer(view=(), gc_pause=0.1)
    warmer.start((slow_module(modules, "warm_probe_gc_off", 0.05),))
    assert warmer.wait()
    warmer.request_sent()
    assert warmer.finished(5)
    assert not gc.isenabled()


def test_an_import_racing_the_thread_gets_the_whole_module(modules: Path) -> None:
    # A cell importing the same module meanwhile blocks on its import lock, never sees it half
    # initialised, and does not import it a second time.
    name = slow_module(modules, "warm_probe_b", 0.3)
    warmer = Warmer()
    warmer.start((name,))
    time.sleep(0.05)  # the thread is inside the module's body now
    __import__(name)
    probe = sys.modules[name]
    assert probe.COMPLETE is True
    assert probe.IMPORTED_BY == THREAD_NAME


def test_a_failing_import_does_not_stop_the_rest(modules: Path) -> None:
    name = slow_module(modules, "warm_probe_c", 0.0)
    (modules / "warm_probe_broken.py").write_text("raise RuntimeError('boom')\n")
    ran = threading.Event()
    warmer = Warmer()
    warmer.start(("warm_probe_broken", "warm_probe_missing_xyz", name), after=ran.set)
    assert ran.wait(5)  # ``after`` still runs (no question waited)
    assert name in sys.modules
    assert "warm_probe_broken" not in sys.modules


def test_wait_gives_up_after_its_timeout(modules: Path) -> None:
    name = slow_module(modules, "warm_probe_d", 1.0)
    warmer = Warmer()
    warmer.start((name,))
    assert warmer.wait(timeout=0.05) is False
    assert warmer.wait()  # and a later wait sees it through
    warmer.request_sent()


def test_wait_without_warming_is_free() -> None:
    assert Warmer().wait(timeout=0) is True
    assert Warmer().finished(timeout=0) is True
    assert Warmer().warming() is False


def test_the_module_list_imports() -> None:
    # A module renamed or removed would silently stop being warmed.
    import importlib

    for name in MODULES:
        importlib.import_module(name)
    assert set(VIEW_MODULES) <= set(MODULES)
