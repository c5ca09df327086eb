"""The "landlock" sandbox: Landlock and seccomp around the child, and a supervisor that reaps.

For machines where bubblewrap cannot run (no user namespaces: Docker, Kubernetes). The sandbox's
child (sandbox_child.py) loads this file from its folder before it reads any untrusted text, so it
is standard library only. ``supervise()`` forks: the parent stays outside and becomes the
supervisor, the child confines itself with ``confine()`` and runs the code.

* **No capabilities**: a kernel run as root (common in containers) would hand the child
  CAP_SYS_MODULE, CAP_CHOWN and the rest; the bounding, ambient and current sets are emptied, and
  no_new_privs keeps an exec from regaining any.
* **Landlock** (the kernel's own unprivileged sandbox, syscalls through ctypes; ABI 6 needed,
  Linux 6.12+): reads only under the Python install and system folders, writes only in the
  child's folder, so no ``/proc`` (no other process, no kernel environ), no ``/etc/shadow``, no
  learner's files; no TCP bind or connect (ABI 4); no signal to and no abstract socket of a
  process outside the sandbox (ABI 6); no ptrace of one (every ABI).
* **seccomp**, through Debian's ``libseccomp`` (``libseccomp2``, via ctypes): no sockets at all
  (UDP, raw and pathname Unix sockets are not covered by Landlock), no ptrace or
  process_vm_readv, no keyrings, io_uring (its operations bypass seccomp), SysV or POSIX message
  IPC, bpf or perf, no change of a file's mode, owner, times or xattrs (Landlock does not cover
  metadata); no resource limits, priority or affinity set on another process; no new namespace
  (unshare, setns, and clone with a CLONE_NEW* flag).
* **The supervisor** is a child subreaper: every process the code starts, even one that double
  forks into a new session, stays below it. When the child ends, or on SIGTERM (a timeout in the
  kernel, or the kernel gone), it kills and reaps them all before it exits. The child cannot
  signal or trace it (Landlock's scopes), so it cannot stop the reaping.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
from collections.abc import Sequence

MIN_ABI = 6

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # one number on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 1, 38, 36
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_MAKE_CHAR, _MAKE_BLOCK = 1 << 6, 1 << 11
_FS_ABI_1 = (1 << 13) - 1
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_EPERM = 0x00050000 | errno.EPERM
_SCMP_ACT_ENOSYS = 0x00050000 | errno.ENOSYS
_SCMP_CMP_NE, _SCMP_CMP_MASKED_EQ = 1, 7
# clone()'s namespace flags (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET): with
# unshare and setns denied, clone was still a way into a new user namespace (the kernel's
# largest attack surface for an unprivileged process). clone3 passes its flags in memory,
# which seccomp cannot read: it is answered ENOSYS, so the C library falls back to clone.
_CLONE_NEW = (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000)
_DENIED = (
    "socket",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "shmget",
    "shmat",
    "msgget",
    "semget",
    "mq_open",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    # What only privileged processes may do: denied again in case a capability were left.
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "open_by_handle_at",
    "iopl",
    "ioperm",
    "acct",
    "quotactl",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "syslog",
    # File metadata is not Landlock's (up to ABI 7): mode, owner, times, xattrs of files outside.
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "file_setattr",
)
# Calls newer than Debian's libseccomp knows, by number: one table on x86_64 and aarch64 since 424.
_NEWER = {"setxattrat": 463, "removexattrat": 466, "file_setattr": 469}
# Calls that may name other processes of the same user (all of them, for PRIO_USER): allowed
# only on this one, i.e. denied when argument ``index`` is not ``value``.
_SELF_ONLY = (
    ("prlimit64", 0, 0),
    ("setpriority", 0, 0),  # PRIO_PROCESS
    ("setpriority", 1, 0),
    ("ioprio_set", 0, 1),  # IOPRIO_WHO_PROCESS
    ("ioprio_set", 1, 0),
    ("sched_setaffinity", 0, 0),
    ("sched_setscheduler", 0, 0),
    ("sched_setparam", 0, 0),
    ("sched_setattr", 0, 0),
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"syscall {number}: {os.strerror(code)}")
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is off or its syscalls are filtered."""
    try:
        return _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except OSError:
        return 0


def libseccomp() -> ctypes.CDLL:
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def confine(work: str, read_roots: Sequence[str]) -> None:
    """Confine this process and all it starts: capabilities, seccomp, then Landlock (for good)."""
    abi = landlock_abi()
    if abi < MIN_ABI:
        raise OSError(f"Landlock ABI {abi} here, {MIN_ABI} needed (Linux 6.12 or later)")
    _drop_capabilities()
    _seccomp()
    fs = _FS_ABI_1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    fs |= _IOCTL_DEV if abi >= 5 else 0
    attr = _RulesetAttr(
        fs, _NET_BIND_TCP | _NET_CONNECT_TCP, _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
    )
    ruleset = _syscall(
        _CREATE_RULESET,
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
        ctypes.c_uint32(0),
    )
    try:
        for root in read_roots:
            _allow(ruleset, root, _EXECUTE | _READ_FILE | _READ_DIR)
        _allow(ruleset, "/dev/null", _READ_FILE | _WRITE_FILE | (fs & _TRUNCATE))
        _allow(ruleset, work, fs & ~(_MAKE_CHAR | _MAKE_BLOCK))
        _syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:  # /lib64 and the like exist on some systems only
        return
    try:
        rule = _PathBeneath(rights, fd)
        _syscall(
            _ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


def _drop_capabilities() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            if code == errno.EINVAL:  # past the kernel's last capability
                break
            if code != errno.EPERM:  # EPERM: no CAP_SETPCAP, so no capability to lose either
                raise OSError(code, f"PR_CAPBSET_DROP {cap}: {os.strerror(code)}")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    nothing = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice 32 bits
    if libc.capset(header, nothing) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")


def _seccomp() -> None:
    """Deny _DENIED (EPERM) and _SELF_ONLY on another process; loading sets no_new_privs."""
    lib = libseccomp()
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)  # other architectures' calls are killed (libseccomp)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        for name in _DENIED:
            _rule(lib, ctx, name, None)
        for name, index, value in _SELF_ONLY:
            _rule(lib, ctx, name, _ArgCmp(index, _SCMP_CMP_NE, value, 0))
        flags = 1 if os.uname().machine.startswith("s390") else 0  # clone(stack, flags) there
        for bit in _CLONE_NEW:
            _rule(lib, ctx, "clone", _ArgCmp(flags, _SCMP_CMP_MASKED_EQ, bit, bit))
        _rule(lib, ctx, "clone3", None, _SCMP_ACT_ENOSYS)
        result = lib.seccomp_load(ctx)
        if result < 0:
            raise OSError(-result, f"seccomp_load: {os.strerror(-result)}")
    finally:
        lib.seccomp_release(ctx)


def _rule(
    lib: ctypes.CDLL, ctx: int, name: str, compare: _ArgCmp | None, action: int = _SCMP_ACT_EPERM
) -> None:
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0 and os.uname().machine in ("x86_64", "aarch64"):
        number = _NEWER.get(name, -1)
    if number < 0:  # no such call on this architecture
        return
    args = ctypes.pointer(compare) if compare is not None else None
    result = lib.seccomp_rule_add_array(ctx, action, number, 1 if compare else 0, args)
    if result < 0:
        raise OSError(-result, f"seccomp rule for {name}: {os.strerror(-result)}")


def supervise() -> None:
    """Fork; return in the child only. The parent reaps everything below it, then exits alike."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_CHILD_SUBREAPER")
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # the kernel gone: reap and end
    signal.signal(signal.SIGTERM, _reap_and_exit)
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    reap_all()
    os._exit(128 - code if code < 0 else code)  # a signal as 128 + its number, as bwrap does


def _reap_and_exit(signum: int, frame: object) -> None:
    reap_all()
    os._exit(128 + signum)


def reap_all() -> None:
    """Kill and reap every process below this one, orphans included, until none is left.

    A process killed while it forks does not complete the fork, so each round leaves fewer.
    """
    while True:
        killed = 0
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        try:
            if killed:  # one of them ends soon: SIGKILL cannot be caught
                os.waitpid(-1, 0)
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: find them by their parent
        return [pid for pid in _all_pids() if _parent_of(pid) == me]


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0
