"""The service's parts without a hub: settings, configure(), the SQL store, the usage scanner."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from deeptutor_jupyter.hub import configure
from deeptutor_jupyter.hub.kernel_socket import (
    bind_kernel_socket,
    closed_to_others,
    private_folder_problem,
)
from deeptutor_jupyter.hub.lease import INTERRUPTED, keep
from deeptutor_jupyter.hub.mastery import (
    MAX_OBJECTIVES_PER_REPORT,
    MasteryRow,
    MasteryStore,
    ReportLimiter,
    mastery_values,
)
from deeptutor_jupyter.hub.packs import PackStore
from deeptutor_jupyter.hub.quota import QuotaStore, Refusal, Ticket, make_engine
from deeptutor_jupyter.hub.settings import (
    GatewayConfig,
    Limits,
    ServiceConfigError,
    load_config,
    upstream_key,
)
from deeptutor_jupyter.hub.usage_stream import UsageScanner

KEY = "sk-teacher-KEY-123456789"


def test_configure_gives_the_key_to_the_service_only() -> None:
    c = Config()
    c.Spawner.environment = {"TZ": "UTC"}
    service = configure(
        c,
        upstream_url="https://api.deepseek.com/v1",
        models=["deepseek-chat"],
        daily_tokens=50_000,
        instructors={"ms-lee"},
        environ={"DEEPTUTOR_UPSTREAM_API_KEY": KEY},
    )
    assert service["environment"]["DEEPTUTOR_HUB_UPSTREAM_KEY"] == KEY
    settings = json.loads(service["environment"]["DEEPTUTOR_HUB_CONFIG"])
    assert settings["instructors"] == ["ms-lee"]
    assert settings["limits"]["daily_tokens"] == 50_000
    assert KEY not in json.dumps(settings)
    env = c.Spawner.environment
    assert env["TZ"] == "UTC"  # the teacher's own entries stay
    assert env["DEEPTUTOR_HUB_SERVICE_URL"] == "http://127.0.0.1:10101/services/deeptutor/v1"
    assert env["DEEPTUTOR_HUB_MODEL"] == "deepseek-chat"
    assert env["DEEPTUTOR_HUB_MODELS"] == "deepseek-chat"  # the panel's chooser offers these
    assert KEY not in json.dumps({k: v for k, v in env.items() if isinstance(v, str)})
    # The kernel's token is minted per spawn for the service alone; the server's token, which
    # opens the student's server, gets no access to the service.
    minted = env["DEEPTUTOR_HUB_TOKEN"]
    assert minted.scopes == ["access:services!service=deeptutor", "read:users:groups!user"]
    assert "server_token_scopes" not in c.Spawner
    user_role = next(r for r in c.JupyterHub.load_roles if r["name"] == "user")
    assert user_role["scopes"] == ["self", "access:services!service=deeptutor"]
    # On one machine kernels use the service's socket, held by the hub's uid (the service's).
    assert env["DEEPTUTOR_HUB_SERVICE_SOCKET"] == "/run/deeptutor-hub/deeptutor.sock"
    assert env["DEEPTUTOR_HUB_SERVICE_UID"] == str(os.geteuid())
    assert service["environment"]["DEEPTUTOR_HUB_SOCKET"] == "/run/deeptutor-hub/deeptutor.sock"
    # Calling it twice (a reloaded config) does not duplicate the service.
    configure(c, upstream_url="https://x/v1", models=["m"], environ={})
    assert [s["name"] for s in c.JupyterHub.services] == ["deeptutor"]


def test_a_kernel_url_means_no_socket_and_a_relative_socket_dir_is_refused() -> None:
    c = Config()
    kernel_url = "http://jupyterhub:10101/services/deeptutor/v1"
    service = configure(c, upstream_url="https://x/v1", models=["m"], kernel_url=kernel_url)
    assert "DEEPTUTOR_HUB_SOCKET" not in service["environment"]
    assert "DEEPTUTOR_HUB_SERVICE_SOCKET" not in c.Spawner.environment
    with pytest.raises(ValueError, match="absolute path"):
        configure(Config(), upstream_url="https://x/v1", models=["m"], socket_dir="run")


def test_a_socket_folder_students_cannot_pass_through_is_named_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Under a 0750 home the service starts, but every student's kernel would get a bare
    # "Permission denied": the start says which folder closes the way.
    top = Path(tempfile.mkdtemp(dir="/tmp"))  # /tmp and / let everyone through
    try:
        top.chmod(0o755)
        run = top / "home" / "run"
        run.mkdir(parents=True)
        assert closed_to_others(run) is None
        (top / "home").chmod(0o750)
        assert closed_to_others(run) == top / "home"
        with caplog.at_level("WARNING", logger="deeptutor_jupyter.hub.kernel_socket"):
            bind_kernel_socket(str(run / "deeptutor.sock")).close()
        assert f"may not pass through {top / 'home'}" in caplog.text
    finally:
        (top / "home").chmod(0o755)
        shutil.rmtree(top)


def test_the_service_binds_its_socket_only_in_a_folder_nobody_else_may_write(
    tmp_path: Path,
) -> None:
    """A folder others may write (or one above it) would let a student put their own socket
    where kernels look; the service refuses to start on it."""
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "open").chmod(0o777)
    with pytest.raises(ServiceConfigError, match="nobody else may write"):
        bind_kernel_socket(str(tmp_path / "open" / "deeptutor.sock"))
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose").chmod(0o777)  # not sticky: a student could move the folder aside
    with pytest.raises(ServiceConfigError, match="may be changed by other users"):
        bind_kernel_socket(str(tmp_path / "loose" / "run" / "deeptutor.sock"))
    if os.geteuid() == 0:  # a folder another user made first
        (tmp_path / "theirs").mkdir()
        os.chown(tmp_path / "theirs", 65534, 65534)
        with pytest.raises(ServiceConfigError, match="owned by uid 0"):
            bind_kernel_socket(str(tmp_path / "theirs" / "deeptutor.sock"))
    # A link above the folder (/var/run -> /run) counts by where it leads, not its own 0777.
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to(tmp_path / "run")
    (tmp_path / "run" / "hub").mkdir(parents=True)
    assert private_folder_problem(tmp_path / "var" / "run" / "hub", os.geteuid()) is None
    (tmp_path / "loose" / "lead" / "hub").mkdir(parents=True)
    (tmp_path / "var" / "loose").symlink_to(tmp_path / "loose" / "lead")
    problem = private_folder_problem(tmp_path / "var" / "loose" / "hub", os.geteuid())
    assert f"{tmp_path / 'loose'} may be changed" in str(problem)
    (tmp_path / "run" / "hub").rmdir()
    (tmp_path / "run").rmdir()
    old_umask = os.umask(0o077)
    try:
        sock = bind_kernel_socket(str(tmp_path / "run" / "deeptutor.sock"))
    finally:
        os.umask(old_umask)
    sock.close()
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "run" / "deeptutor.sock").stat().st_mode) == 0o666


def test_configure_with_a_key_file_and_without_models() -> None:
    c = Config()
    service = configure(
        c, upstream_url="http://vllm:8000/v1", models=["qwen"], api_key_file="/etc/key", environ={}
    )
    assert service["environment"]["DEEPTUTOR_HUB_UPSTREAM_KEY_FILE"] == "/etc/key"
    assert "DEEPTUTOR_HUB_UPSTREAM_KEY" not in service["environment"]
    with pytest.raises(ValueError, match="at least one model"):
        configure(Config(), upstream_url="http://x/v1", models=[], environ={})


def test_settings_errors_are_words_and_never_the_key(tmp_path: Path) -> None:
    with pytest.raises(ServiceConfigError, match="not set"):
        load_config({})
    with pytest.raises(ServiceConfigError, match="upstream_url"):
        load_config({"DEEPTUTOR_HUB_CONFIG": json.dumps({"upstream_url": "ftp://x"})})
    missing = tmp_path / "nokey"
    with pytest.raises(ServiceConfigError, match="could not be read") as info:
        upstream_key({"DEEPTUTOR_HUB_UPSTREAM_KEY_FILE": str(missing)})
    assert KEY not in str(info.value)
    (tmp_path / "key").write_text(KEY + "\n")
    secret = upstream_key({"DEEPTUTOR_HUB_UPSTREAM_KEY_FILE": str(tmp_path / "key")})
    assert secret is not None and secret.get_secret_value() == KEY
    assert KEY not in repr(secret)


def test_group_limits_pick_the_most_generous() -> None:
    config = GatewayConfig(
        upstream_url="http://x/v1",
        limits=Limits(daily_tokens=100, requests_per_minute=5),
        groups={
            "honours": Limits(daily_tokens=1000, requests_per_minute=5),
            "staff": Limits(daily_tokens=None, requests_per_minute=60),
        },
    )
    assert config.limits_for(()) == Limits(daily_tokens=100, requests_per_minute=5)
    assert config.limits_for(("honours",)).daily_tokens == 1000
    assert config.limits_for(("honours", "staff")) == Limits(
        daily_tokens=None, requests_per_minute=60
    )


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 12, 3, 23, 59, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now


def store(tmp_path: Path, clock: Clock) -> QuotaStore:
    return QuotaStore(make_engine(f"sqlite:///{tmp_path}/q.sqlite"), clock=clock)


def test_a_request_holds_its_max_tokens_until_it_settles(tmp_path: Path) -> None:
    clock = Clock()
    quota = store(tmp_path, clock)
    limits = Limits(daily_tokens=300, requests_per_minute=None)
    tickets = [quota.admit("alice", limits, 100) for _ in range(4)]
    assert [isinstance(t, Ticket) for t in tickets] == [True, True, True, False]
    refusal = tickets[3]
    assert isinstance(refusal, Refusal) and refusal.code == "budget_exhausted"
    first = tickets[0]
    assert isinstance(first, Ticket)
    quota.settle(first, "m", 10, 20)  # used 30 instead of the 100 held
    assert isinstance(quota.admit("alice", limits, 50), Ticket)
    assert quota.used_today("alice") == 30
    [row] = quota.usage("alice")
    assert (row.requests, row.prompt_tokens, row.completion_tokens) == (1, 10, 20)
    # A new UTC day starts a new budget.
    clock.now += dt.timedelta(minutes=2)
    assert isinstance(quota.admit("alice", limits, 100), Ticket)


def test_requests_per_minute(tmp_path: Path) -> None:
    clock = Clock()
    quota = store(tmp_path, clock)
    limits = Limits(daily_tokens=None, requests_per_minute=2)
    assert isinstance(quota.admit("bob", limits, 1), Ticket)
    assert isinstance(quota.admit("bob", limits, 1), Ticket)
    third = quota.admit("bob", limits, 1)
    assert isinstance(third, Refusal) and third.code == "rate_limited"
    assert third.retry_after == 60 and "2 a minute" in third.message
    assert isinstance(quota.admit("carol", limits, 1), Ticket)  # per student
    clock.now += dt.timedelta(minutes=1)
    assert isinstance(quota.admit("bob", limits, 1), Ticket)


def test_a_released_hold_is_given_back_to_the_days_budget(tmp_path: Path) -> None:
    quota = store(tmp_path, Clock())
    limits = Limits(daily_tokens=100, requests_per_minute=None)
    ticket = quota.admit("dave", limits, 100)
    assert isinstance(ticket, Ticket) and quota.today("dave") == (0, 100)
    assert isinstance(quota.admit("dave", limits, 1), Refusal)
    quota.release(ticket)  # the upstream failed: nothing used, the hold is back
    assert quota.today("dave") == (0, 0)
    assert isinstance(quota.admit("dave", limits, 100), Ticket)


def test_a_request_refused_for_budget_gives_its_minute_slot_back(tmp_path: Path) -> None:
    quota = store(tmp_path, Clock())
    limits = Limits(daily_tokens=100, requests_per_minute=2)
    ticket = quota.admit("erin", limits, 100)  # the first slot of the minute
    assert isinstance(ticket, Ticket)
    for _ in range(3):  # refused for the budget, each time: no slot is spent
        refusal = quota.admit("erin", limits, 1)
        assert isinstance(refusal, Refusal) and refusal.code == "budget_exhausted"
    quota.release(ticket)
    assert isinstance(quota.admit("erin", limits, 100), Ticket)  # the second slot


def test_student_overrides(tmp_path: Path) -> None:
    quota = store(tmp_path, Clock())
    quota.set_student_override("alice", Limits(daily_tokens=9, requests_per_minute=None))
    assert quota.student_override("alice") == Limits(daily_tokens=9, requests_per_minute=None)
    quota.set_student_override("alice", None)
    assert quota.student_override("alice") is None


def test_a_mastery_figure_changes_only_after_enough_new_reports(tmp_path: Path) -> None:
    marks = MasteryStore(make_engine(f"sqlite:///{tmp_path}/m.sqlite"), clock=Clock())
    for i, name in enumerate(["a", "b", "c"]):
        marks.report(name, {"limits": (i / 2, 3)})
    marks.report("a", {"limits": (1.0, 4)})  # a later report replaces the earlier
    assert marks.by_objective(4) == [MasteryRow("limits", 3, None, None)]  # too few
    first = MasteryRow("limits", 3, pytest.approx((1.0 + 0.5 + 1.0) / 3, abs=0.01), 2, 3)
    assert marks.by_objective(3) == [first]
    # A fourth student reports: the figure would give away their value (4 * new - 3 * old),
    # so it stays until three students (the smallest group shown) have reported again.
    marks.report("d", {"limits": (0.0, 5)})
    assert marks.by_objective(3) == [MasteryRow("limits", 4, first.mean, 2, 3)]
    marks.report("d", {"limits": (0.1, 5)})  # the same student again counts once
    marks.report("a", {"limits": (1.0, 5)})
    assert marks.by_objective(3)[0].shown_students == 3
    marks.report("b", {"limits": (0.5, 5)})
    assert marks.by_objective(3) == [
        MasteryRow("limits", 4, pytest.approx((1.0 + 0.5 + 1.0 + 0.1) / 4, abs=0.01), 2, 4)
    ]
    # Forgetting a student withdraws the figure until enough new reports arrive: the figures
    # before and after cannot be subtracted either.
    assert marks.forget_student("d") == 1
    assert marks.by_objective(3) == [MasteryRow("limits", 3, None, None)]
    for name in ("a", "b", "c"):
        marks.report(name, {"limits": (0.5, 3)})
    assert marks.by_objective(3) == [MasteryRow("limits", 3, 0.5, 0, 3)]
    assert marks.forget_objective("limits") == 3
    assert marks.by_objective(3) == []


def test_a_mastery_report_names_course_objectives_with_numbers_only() -> None:
    course = {"limits", "derivatives"}
    assert mastery_values(b'{"limits": {"p": 0.5, "n": 2}, "derivatives": 1}', course) == {
        "limits": (0.5, 2),
        "derivatives": (1.0, 0),
    }
    refusals = {
        b'{"my-notes": 0.5}': "not one of the course's objectives",
        b'{"limits": 1.5}': "between 0 and 1",
        b'{"limits": {"p": 0.5, "n": 1e30}}': "whole number",
        b'{"limits": {"p": 0.5, "n": 2, "answer": "x"}}': "only p (mastery) and n",
        b'{"limits": true}': "between 0 and 1",
        b"[1]": "Send an object",
    }
    for body, words in refusals.items():
        reason = mastery_values(body, course)
        assert isinstance(reason, str) and words in reason, body
    assert "lists no objectives" in str(mastery_values(b'{"limits": 0.5}', set()))
    many = json.dumps({f"o{i}": 0.5 for i in range(MAX_OBJECTIVES_PER_REPORT + 1)}).encode()
    assert "up to 200" in str(mastery_values(many, {f"o{i}" for i in range(300)}))


def test_reports_are_rate_limited_per_student_in_the_shared_database(tmp_path: Path) -> None:
    """Two limiters on one database (two replicas) enforce one limit between them."""
    now = [dt.datetime(2026, 3, 1, 10, 0, 10, tzinfo=dt.UTC)]
    engine = make_engine(f"sqlite:///{tmp_path / 'hub.sqlite'}")
    one, two = (ReportLimiter(engine, lambda: now[0], per_minute=2) for _ in range(2))
    assert [one.wait_for("a"), two.wait_for("a")] == [0, 0]
    assert one.wait_for("a") == 50 and two.wait_for("a") == 50
    assert two.wait_for("b") == 0  # per student
    assert two.wait_for("a", "score") == 0  # and per kind of report
    now[0] += dt.timedelta(seconds=55)  # the next minute
    assert two.wait_for("a") == 0
    with engine.connect() as conn:  # the earlier minute's count was swept
        rows = conn.exec_driver_sql("SELECT student, kind FROM deeptutor_report_minute").all()
    assert sorted(map(tuple, rows)) == [("a", "mastery"), ("a", "score"), ("b", "mastery")]


def test_a_pack_knows_its_objectives_as_the_kernel_does(tmp_path: Path) -> None:
    import io
    import tarfile

    text = b"# Calc\n\n## Objectives\n\n- Limits: the idea\n- Derivatives\n- Limits\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("TUTOR.md")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    packs = PackStore(make_engine(f"sqlite:///{tmp_path}/p.sqlite"))
    assert packs.objectives() == set()
    packs.publish("calc", None, buffer.getvalue(), "ms-lee")
    assert packs.objectives() == {"limits", "derivatives", "limits-2"}


def test_the_scanner_finds_usage_split_across_chunks() -> None:
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 34}}\n\n'
    scanner = UsageScanner()
    scanner.feed(b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n' + usage[:30])
    scanner.feed(usage[30:] + b"data: [DONE]\n\n")
    assert scanner.usage(999) == (12, 34)
    silent = UsageScanner()
    silent.feed(b'data: {"choices": [{"delta": {"content": "a"}}]}\n\ndata: {"choices": []}\n\n')
    assert silent.usage(7) == (7, 2)  # the estimate: the prompt's share, one token a delta


def test_the_budget_is_a_cap_on_prompt_and_answer_together(tmp_path: Path) -> None:
    quota = store(tmp_path, Clock())
    limits = Limits(daily_tokens=2_000, requests_per_minute=None)
    # Four answers asked for at once cannot hold more than the day between them: the third is
    # granted what is left, the fourth nothing.
    tickets = [quota.admit("ann", limits, 800, prompt=100) for _ in range(4)]
    granted = [t.answer if isinstance(t, Ticket) else None for t in tickets]
    assert granted == [800, 800, 100, None]
    assert sum(t.held for t in tickets if isinstance(t, Ticket)) == 2_000
    assert quota.today("ann") == (0, 2_000)
    # A prompt larger than what is left is refused outright, not admitted with no answer.
    assert isinstance(quota.admit("ben", limits, 10, prompt=2_000), Refusal)
    assert quota.today("ben") == (0, 0)


def test_one_failing_operation_does_not_fail_the_others_in_its_batch(tmp_path: Path) -> None:
    quota = store(tmp_path, Clock())
    limits = Limits(daily_tokens=1_000, requests_per_minute=5)
    held = quota.admit("ann", limits, 300)
    assert isinstance(held, Ticket)

    def overflow(conn: Any) -> None:
        # What a max_tokens past 64 bits did before requests were typed: the driver's
        # OverflowError is no DBAPIError, and it once failed every admission and settlement
        # batched with it (held tokens then stayed held for the rest of the day).
        conn.exec_driver_sql("SELECT ?", (2**70,))

    results = quota.run_batch(
        [
            lambda conn: quota.admit_in(conn, "bob", limits, 100),
            overflow,
            lambda conn: quota.settle_in(conn, held, "m", 10, 20),
        ]
    )
    assert isinstance(results[0], Ticket)
    assert isinstance(results[1], OverflowError)
    assert quota.today("bob") == (0, 100)
    assert quota.today("ann") == (30, 0)  # the settlement committed: nothing stays held


def test_the_sqlite_file_is_readable_by_the_service_only(tmp_path: Path) -> None:
    path = tmp_path / "hub.sqlite"
    path.write_bytes(b"")
    path.chmod(0o644)  # as an older version left it
    quota = QuotaStore(make_engine(f"sqlite:///{path}"))
    quota.admit("ann", Limits(daily_tokens=10, requests_per_minute=None), 1)
    for name in ("hub.sqlite", "hub.sqlite-wal", "hub.sqlite-shm"):
        if (tmp_path / name).exists():
            assert (tmp_path / name).stat().st_mode & 0o077 == 0, name


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"max_tokens": 2**63}, "max_tokens must be a whole number from 1 to 1,000,000"),
        ({"max_tokens": -1}, "max_tokens must be a whole number"),
        ({"max_tokens": "100"}, "max_tokens must be a whole number"),
        ({"max_completion_tokens": 1.5}, "max_completion_tokens must be a whole number"),
        ({"n": 5}, "one answer per request"),
        ({"stream": "true"}, "stream must be true or false"),
        ({"stream": 1}, "stream must be true or false"),
        ({"service_tier": "priority", "store": True}, "'service_tier', 'store'"),
        ({"messages": "hi"}, "a model and a list of messages"),
        ({"model": None}, "a model and a list of messages"),
    ],
)
def test_requests_are_typed_and_bounded(body: dict[str, object], words: str) -> None:
    from deeptutor_jupyter.hub.request import RequestError, parse_chat_body

    sent = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    with pytest.raises(RequestError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_chat_body(json.dumps(sent).encode())


def test_a_plain_tutor_request_passes_as_sent() -> None:
    from deeptutor_jupyter.hub.request import parse_chat_body

    sent = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [{"type": "function", "function": {"name": "ask_user", "parameters": {}}}],
        "temperature": 0.2,
        "max_completion_tokens": 900,
    }
    body, raw = parse_chat_body(json.dumps(sent).encode())
    assert raw == sent
    assert (body.stream, body.asked_tokens) == (True, 900)


def test_holds_of_a_dead_replica_go_back_after_its_lease(tmp_path: Path) -> None:
    clock = Clock()
    clock.now = dt.datetime(2026, 12, 3, 10, 0, 0, tzinfo=dt.UTC)
    engine = make_engine(f"sqlite:///{tmp_path}/q.sqlite")
    a = QuotaStore(engine, clock=clock, replica="host-a:10101")
    b = QuotaStore(engine, clock=clock, replica="host-b:10101")
    limits = Limits(daily_tokens=1000, requests_per_minute=None)
    keep(a, 60), keep(b, 60)
    ticket = a.admit("alice", limits, 400, prompt=100)
    live = b.admit("bob", limits, 400, prompt=100)
    assert isinstance(ticket, Ticket) and isinstance(live, Ticket)
    clock.now += dt.timedelta(seconds=59)
    assert keep(b, 60) == 0  # a's lease has not run out yet
    clock.now += dt.timedelta(seconds=2)
    assert keep(b, 60) == 1  # a died: alice's hold goes back, her prompt is billed
    assert a.today("alice") == (100, 0)
    assert b.today("bob") == (0, 500)  # b's own running request keeps its hold
    assert [(r.model, r.prompt_tokens) for r in a.usage("alice")] == [(INTERRUPTED, 100)]
    # a was only slow: its settlement arrives after the sweep and gives nothing back twice.
    a.settle(ticket, "m", 100, 50)
    assert a.today("alice") == (250, 0)


def test_a_restarted_service_gives_back_its_earlier_holds_at_once(tmp_path: Path) -> None:
    clock = Clock()
    engine = make_engine(f"sqlite:///{tmp_path}/q.sqlite")
    limits = Limits(daily_tokens=1000, requests_per_minute=None)
    before = QuotaStore(engine, clock=clock, replica="host:10101")
    keep(before, 60)
    assert isinstance(before.admit("alice", limits, 950, prompt=50), Ticket)
    assert isinstance(before.admit("alice", limits, 900), Refusal)  # held: nothing left
    after = QuotaStore(engine, clock=clock, replica="host:10101")  # the same port, restarted
    assert keep(after, 60) == 1
    assert after.today("alice") == (50, 0)
    assert isinstance(after.admit("alice", limits, 900), Ticket)
    assert keep(after, 60) == 0  # its own running request stays held


def test_a_ticket_keeps_the_prompt_estimate_it_was_admitted_with(tmp_path: Path) -> None:
    """The gateway bills a stream without usage by the estimate made at admission (it does not
    serialise the body twice): the ticket carries it, with or without a daily budget, and
    also when the answer was granted less than asked."""
    quota = store(tmp_path, Clock())
    for student, limits, asked, granted in (
        ("erin", Limits(daily_tokens=None, requests_per_minute=None), 300, 300),
        ("finn", Limits(daily_tokens=1_000, requests_per_minute=None), 300, 300),
        ("gail", Limits(daily_tokens=1_000, requests_per_minute=None), 5_000, 1_000 - 40),
    ):
        ticket = quota.admit(student, limits, asked, prompt=40)
        assert isinstance(ticket, Ticket)
        assert (ticket.prompt, ticket.answer) == (40, granted)
