"""Describing one of the learner's values for the tutor, without letting the value hold the kernel.

A value's ``__repr__``, ``len`` or attributes are the learner's code (or a library's C code): they
may spin, block, hold the GIL or change state. On Linux the preview is built in a forked child of
the kernel: it sees the value as it is, its side effects stay in the child, and a hard timeout
kills it, whatever it holds. Elsewhere it runs on a daemon thread (``describe_on_thread``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import reprlib
import signal
import sys
import threading
from typing import Any

PREVIEW_CHARS = 1500
# What a child may send back: a preview is bounded far below this; more is a broken child.
_REPLY_BYTES = 1 << 20
# fork() with the kernel's threads is safe only where the child runs nothing but Python code of
# ours and exits with os._exit (Linux); macOS forbids it once system frameworks have threads.
CAN_FORK = sys.platform.startswith("linux")


# How long describing one variable may take before the tutor gives up on it (a user's
# ``__repr__`` may spin or wait on the network); the work runs off the kernel loop meanwhile.
INSPECT_SECONDS = 3.0


class _BoundedRepr(reprlib.Repr):
    """reprlib with limits, and no step that walks a whole container.

    reprlib sorts a set or a dict before showing a few of its items, and falls back to the full
    ``repr`` for bytes and for subclasses of list or dict: each is a single C call that holds the
    GIL for seconds on 50 million items, so these are replaced by slices.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxdeque = self.maxarray = 20
        self.maxset = self.maxfrozenset = self.maxdict = 20
        self.maxstring = 300
        self.maxlong = 60
        self.maxother = PREVIEW_CHARS

    def _items(self, x: Any, level: int, left: str, right: str, limit: int) -> str:
        if level <= 0 and len(x):
            return left + self.fillvalue + right
        pieces = [self.repr1(item, level - 1) for item in itertools.islice(x, limit)]
        if len(x) > limit:
            pieces.append(self.fillvalue)
        return left + ", ".join(pieces) + right

    def repr_set(self, x: Any, level: int) -> str:
        return self._items(x, level, "{", "}", self.maxset) if x else "set()"

    def repr_frozenset(self, x: Any, level: int) -> str:
        if not x:
            return "frozenset()"
        return self._items(x, level, "frozenset({", "})", self.maxfrozenset)

    def repr_dict(self, x: Any, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{" + self.fillvalue + "}"
        pieces = [
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in itertools.islice(x.items(), self.maxdict)
        ]
        if len(x) > self.maxdict:
            pieces.append(self.fillvalue)
        return "{" + ", ".join(pieces) + "}"

    def repr_int(self, x: Any, level: int) -> str:
        # str() of a huge int is quadratic (and refused past 4300 digits).
        if x.bit_length() > 4 * self.maxlong:
            return f"<int of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    def repr_bytes(self, x: Any, level: int) -> str:
        return self._sliced(x)

    def repr_bytearray(self, x: Any, level: int) -> str:
        return self._sliced(x)

    def _sliced(self, x: Any) -> str:
        more = f" … ({len(x) - self.maxstring} more)" if len(x) > self.maxstring else ""
        return repr(x[: self.maxstring]) + more

    def repr_instance(self, x: Any, level: int) -> str:
        name = type(x).__name__
        if isinstance(x, dict):
            return f"{name}({self.repr_dict(x, level)})"
        if isinstance(x, (list, tuple)):
            return f"{name}({self._items(x, level, '[', ']', self.maxlist)})"
        if isinstance(x, (str, bytes, bytearray)):
            return f"{name}({self._sliced(x)})"
        return super().repr_instance(x, level)


_BOUNDED = _BoundedRepr()


def preview(value: Any) -> dict[str, Any]:
    """Type, shape, dtype, length and a bounded repr: what a tutor needs, never a full dump.

    Sizes come first and the preview of a container shows a few items, so the cost does not
    grow with the value; a user's ``__repr__`` may still be slow, hence ``describe`` below.
    """
    info: dict[str, Any] = {"type": type_name(value)}
    if issubclass(type(value), type):
        # A class: its attributes and repr go through its metaclass, which may run anything;
        # its name, read from the slots, is all a tutor needs.
        info["preview"] = f"<class '{class_name(value)}'>"
        return info
    for attr in ("shape", "dtype"):
        with contextlib.suppress(Exception):
            if hasattr(value, attr):
                info[attr] = _BOUNDED.repr(getattr(value, attr))[:200]
    with contextlib.suppress(Exception):
        if hasattr(value, "columns"):
            columns = itertools.islice(iter(value.columns), 50)
            info["columns"] = [_BOUNDED.repr(c)[:100] for c in columns]
    with contextlib.suppress(Exception):
        info["len"] = len(value)
    shown = value
    with contextlib.suppress(Exception):
        if hasattr(value, "head") and hasattr(value, "columns"):
            shown = value.head()
    try:
        text = _BOUNDED.repr(shown)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS] + f" … ({len(text) - PREVIEW_CHARS} more chars)"
    info["preview"] = text
    return info


def type_name(value: Any) -> str:
    return class_name(type(value))  # type() never runs the learner's code, unlike __class__


_MODULE = type.__dict__["__module__"]
_QUALNAME = type.__dict__["__qualname__"]


def class_name(cls: type) -> str:
    """``module.qualname`` read from the class's own slots, never through ``cls.__module__``:
    a metaclass may define those as properties, and this runs on the kernel's loop too (after
    a timeout), where a slow property froze the kernel for a minute (issue 23)."""
    try:
        module = _MODULE.__get__(cls, type)
    except Exception:
        module = None
    qualname = _QUALNAME.__get__(cls, type)
    module = module if type(module) is str else "?"
    qualname = qualname if type(qualname) is str else "?"
    return f"{module}.{qualname}"


async def describe(value: Any, timeout: float = INSPECT_SECONDS) -> dict[str, Any] | None:
    """``preview(value)`` where it cannot hold the kernel; None when it takes over ``timeout``.

    Cancelling the awaiting coroutine (Stop) ends the work at once.
    """
    if CAN_FORK:
        return await describe_in_child(value, timeout)
    return await describe_on_thread(value, timeout)


async def describe_in_child(value: Any, timeout: float = INSPECT_SECONDS) -> dict[str, Any] | None:
    """``preview(value)`` in a forked child of the kernel, killed after ``timeout``.

    The child is a copy of the kernel at this instant, so the value is there without pickling;
    C code holding the GIL there holds the child's GIL, never the kernel's. The child has none
    of the kernel's threads (iopub, heartbeat), so it must not print to the kernel's streams,
    finalise the kernel's objects (the garbage collector is off) or run exit handlers.
    """
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child ends in os._exit, which coverage never sees
        _child(value, read_fd, write_fd, timeout)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    reply = bytearray()
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            chunk = os.read(read_fd, 65536)
        except BlockingIOError:
            return
        except OSError as exc:
            chunk = b""
            if not done.done():
                done.set_exception(exc)
        if chunk and len(reply) < _REPLY_BYTES:
            reply.extend(chunk)
            return
        if not done.done():
            done.set_result(None)

    loop.add_reader(read_fd, readable)
    try:
        await asyncio.wait_for(done, timeout)
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)
        _end_child(pid)
    answer = json.loads(reply.decode("utf-8")) if reply else None
    if not isinstance(answer, dict):
        raise RuntimeError("describing the value ended without a result")
    if "error" in answer:
        raise RuntimeError(str(answer["error"]))
    info = answer.get("info")
    return info if isinstance(info, dict) else None


def _child(value: Any, read_fd: int, write_fd: int, timeout: float) -> None:
    status = 0
    try:
        import gc
        import io

        gc.disable()
        os.close(read_fd)
        # Dies on its own should the kernel die without killing it.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(max(1, int(timeout) + 2))
        sys.stdout = sys.stderr = io.StringIO()
        try:
            reply: dict[str, Any] = {"info": preview(value)}
        except BaseException as exc:  # any failure is the parent's to report
            reply = {"error": f"{type(exc).__name__}: {exc}"[:PREVIEW_CHARS]}
        data = json.dumps(reply, ensure_ascii=False, default=str).encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _end_child(pid: int) -> None:
    """Kill the child if it still runs and reap it, so no zombie is left."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


class _Abandoned(BaseException):
    """Raised inside a describing thread that nobody waits for any more."""


async def describe_on_thread(value: Any, timeout: float = INSPECT_SECONDS) -> dict[str, Any] | None:
    """``preview(value)`` on a daemon thread; None when it takes longer than ``timeout``.

    The fallback where a process cannot be forked (not Linux).

    The kernel loop stays free meanwhile (other cells run, Stop is heard), and the awaiting
    coroutine can be cancelled at once. A thread cannot be killed, so an abandoned one is sent
    an exception it raises at its next bytecode: a spinning ``__repr__`` in Python stops there;
    one stuck inside C code finishes on its own, on a daemon thread that never blocks exit.

    What a thread cannot bound: C code that holds the GIL (a C extension's ``__repr__`` or
    ``__len__`` that never releases it) stops every thread of the kernel, the loop included,
    until it returns. Nothing of the learner's runs on the loop itself: the type's name is
    read from its slots (``class_name``).
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[dict[str, Any]] = loop.create_future()

    def settle(result: dict[str, Any] | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result or {})

    def work() -> None:
        result, error = None, None
        try:
            result = preview(value)
        except _Abandoned:
            return
        except BaseException as exc:  # handed to the awaiting coroutine
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop may be closed by then
            loop.call_soon_threadsafe(settle, result, error)

    thread = threading.Thread(target=work, name="deeptutor-inspect", daemon=True)
    thread.start()
    try:
        return await asyncio.wait_for(done, timeout)
    except TimeoutError:
        _abandon(thread)
        return None
    except asyncio.CancelledError:
        _abandon(thread)
        raise


def _abandon(thread: threading.Thread) -> None:
    import ctypes

    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandoned)
        )
