"""The program the sandbox runs (learning/sandbox.py copies it into a fresh folder).

It runs with ``python -I -S`` and only the standard library. It reads a nonce from stdin; in the
"landlock" mode it confines itself (sandbox_confine.py); it limits itself before reading any
untrusted text (CPU, address space, open files, file size, no core dump), installs an audit hook
that refuses network, processes and writes outside its folder (a second fence inside bubblewrap
or Landlock; the only one, and a weak one, in the "unsafe" mode), then runs the learner's code
and the model's tests in one namespace. The outcome goes to the private pipe whose
number config.json names, tagged with the nonce: printing a fake outcome grades nothing. (Code
that digs the nonce out of this process's memory can fake its own grade: it runs here, after all.
It can reach nothing outside the sandbox by that.)
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

OUTPUT_LIMIT = 4000
MESSAGE_LIMIT = 2000

_REFUSED_EVENTS = {
    "socket.__new__": "network access",
    "socket.connect": "network access",
    "socket.bind": "network access",
    "socket.getaddrinfo": "network access",
    "socket.gethostbyname": "network access",
    "subprocess.Popen": "starting processes",
    "os.system": "starting processes",
    "os.exec": "starting processes",
    "os.posix_spawn": "starting processes",
    "os.spawn": "starting processes",
    "os.fork": "starting processes",
    "os.forkpty": "starting processes",
    "os.kill": "signalling processes",
    "os.killpg": "signalling processes",
    "ctypes.dlopen": "loading native code",
    "ctypes.dlsym": "loading native code",
    "ctypes.cdata": "loading native code",
    "os.symlink": "creating links",
    "os.link": "creating links",
}
# Events whose first argument is a path that must stay inside the folder.
_PATH_EVENTS = {
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.utime",
    "shutil.rmtree",
    "shutil.move",
    "shutil.copyfile",
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# RLIMIT_FSIZE caps each file; this caps how many, so a loop cannot fill the disk 1 MiB at a time.
MAX_WRITES = 64


def _out_of_cpu(signum: int, frame: object) -> None:
    os._exit(128 + signal.SIGXCPU)  # the parent reads 128 + signal as that signal


def _limit(cpu_seconds: int, memory_bytes: int, file_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    # Under bwrap --as-pid-1 this process is a namespace's init, which ignores SIGXCPU unless it
    # has a handler; the hard limit's SIGKILL a second later gets through either way.
    signal.signal(signal.SIGXCPU, _out_of_cpu)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))


def _inside(root: str, path: object) -> bool:
    if isinstance(path, int):  # an already open descriptor
        return True
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    full = os.path.normpath(os.path.join(root, str(path)))
    # By parts, not by string prefix: "/tmp/root2" is not inside "/tmp/root".
    return PurePath(full).is_relative_to(root)


def _install_hook(root: str) -> None:
    writes = [0]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _REFUSED_EVENTS:
            raise PermissionError(f"refused by the sandbox: {_REFUSED_EVENTS[event]} ({event})")
        if event == "open" and args:
            path, mode, flags = [*args, None, None][:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not _inside(root, path):
                raise PermissionError(f"refused by the sandbox: writing to {path!s}")
            if writing and not isinstance(path, int):
                writes[0] += 1
                if writes[0] > MAX_WRITES:
                    raise PermissionError(f"refused by the sandbox: more than {MAX_WRITES} files")
        elif event in _PATH_EVENTS and args:
            for path in args[:2]:
                if isinstance(path, str | bytes | int) and not _inside(root, path):
                    raise PermissionError(f"refused by the sandbox: {event} on {path!s}")

    sys.addaudithook(hook)


class _Capped:
    """Learner prints, kept up to a limit for the feedback."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:
        if self.size < OUTPUT_LIMIT:
            self.parts.append(text[: OUTPUT_LIMIT - self.size])
            self.size += len(self.parts[-1])
        return len(text)

    def flush(self) -> None:
        pass

    def text(self) -> str:
        return "".join(self.parts)


def _where(exc: BaseException, sources: dict[str, list[str]]) -> tuple[str | None, int | None]:
    """The deepest line of the learner's code or the tests where the exception passed."""
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename in sources:
            found = (frame.filename, frame.lineno)
    return found


def _run(report: Callable[[dict[str, Any]], None], hook: bool) -> None:
    root = os.getcwd()
    with open("solution.py", encoding="utf-8") as f:
        solution = f.read()
    with open("tests.py", encoding="utf-8") as f:
        tests = f.read()
    sources = {"solution.py": solution.splitlines(), "tests.py": tests.splitlines()}
    if hook:
        _install_hook(root)
    captured = _Capped()
    sys.stdout = sys.stderr = captured
    namespace: dict[str, Any] = {"__name__": "__main__"}
    result: dict[str, Any] = {
        "status": "passed",
        "message": "",
        "file": None,
        "line": None,
        "source": "",
    }
    try:
        exec(compile(solution, "solution.py", "exec"), namespace)
        exec(compile(tests, "tests.py", "exec"), namespace)
    except AssertionError as exc:
        result.update(status="failed", message=str(exc))
        result["file"], result["line"] = _where(exc, sources)
    except MemoryError:
        result.update(status="memory", message="the code ran out of memory")
    except RecursionError as exc:
        result.update(status="error", message=f"RecursionError: {exc}")
        result["file"], result["line"] = _where(exc, sources)
    except SyntaxError as exc:
        result.update(status="error", message=f"SyntaxError: {exc.msg}")
        result["file"], result["line"] = exc.filename, exc.lineno
    except BaseException as exc:
        result.update(status="error", message=f"{type(exc).__name__}: {exc}")
        result["file"], result["line"] = _where(exc, sources)
    name, line = result["file"], result["line"]
    if name in sources and line and 0 < line <= len(sources[name]):
        result["source"] = sources[name][line - 1].strip()
    result["output"] = captured.text()
    result["message"] = result["message"][:MESSAGE_LIMIT]
    report(result)


def _confine(read_roots: list[str]) -> None:
    """The "landlock" mode (sandbox_confine.py, copied here as confine.py): from here on this is
    the supervised child under Landlock and seccomp; the supervisor never returns."""
    namespace: dict[str, Any] = {"__name__": "confine"}
    with open("confine.py", encoding="utf-8") as f:
        exec(compile(f.read(), "confine.py", "exec"), namespace)
    namespace["supervise"]()
    namespace["confine"](os.getcwd(), read_roots)


def main() -> None:
    nonce = os.read(0, 64).decode("ascii").strip()  # not sys.stdin: no buffer keeps a copy
    with open("config.json", encoding="utf-8") as f:
        config = json.load(f)
    verdict_fd = config["verdict_fd"]

    def report(result: dict[str, Any]) -> None:
        data = (nonce + " " + json.dumps(result) + "\n").encode("utf-8")
        while data:
            data = data[os.write(verdict_fd, data) :]

    if config.get("landlock"):
        try:
            _confine(config["read_roots"])
        except Exception as exc:  # nothing runs unconfined
            report(
                {"status": "not_run", "message": f"The sandbox could not confine the code: {exc}"}
            )
            return
    _limit(config["cpu_seconds"], config["memory_bytes"], config["file_bytes"])
    try:
        _run(report, hook=config.get("audit_hook", True))
    except MemoryError:
        report({"status": "memory", "message": "the code ran out of memory"})


if __name__ == "__main__":
    main()
