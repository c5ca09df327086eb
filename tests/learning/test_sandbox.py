"""The code sandbox: outcomes, limits and fences, in bubblewrap, under Landlock and unconfined."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from deeptutor_jupyter.learning.quiz import CodeQuestion
from deeptutor_jupyter.learning.sandbox import (
    Sandbox,
    bwrap_works,
    feedback_of,
    grade_code,
    landlock_problem,
)
from deeptutor_jupyter.learning.sandbox_child import _inside

SQUARE = "def f(x):\n    return x * x\n"


@pytest.fixture(params=["bwrap", "landlock", "unsafe"])
def sandbox(request) -> Sandbox:
    if request.param == "bwrap" and not bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces on this machine")
    if request.param == "landlock" and (problem := landlock_problem()):
        pytest.skip(f"Landlock cannot confine here: {problem}")
    return Sandbox(mode=request.param)


def test_passing_code(sandbox):
    outcome = sandbox.run_sync(SQUARE, "assert f(2) == 4\nassert f(-3) == 9", 5)
    assert outcome.status == "passed" and outcome.isolation == sandbox.isolation


def test_failed_assertion_names_its_line(sandbox):
    outcome = sandbox.run_sync(SQUARE, "assert f(2) == 4\nassert f(3) == 10, 'f(3)'", 5)
    assert (outcome.status, outcome.line, outcome.file) == ("failed", 2, "tests.py")
    assert outcome.source == "assert f(3) == 10, 'f(3)'"
    assert "line 2 of the tests: `assert f(3) == 10, 'f(3)'`" in feedback_of(outcome, 5)


def test_error_in_the_learners_code_points_at_it(sandbox):
    outcome = sandbox.run_sync("def f(x):\n    return x / 0\n", "assert f(1) == 1", 5)
    assert outcome.status == "error" and "ZeroDivisionError" in outcome.message
    assert (outcome.file, outcome.line) == ("solution.py", 2)


def test_infinite_loop_times_out(sandbox):
    outcome = sandbox.run_sync("def f(x):\n    while True:\n        pass\n", "f(1)", 1)
    assert outcome.status == "timeout"


def test_memory_bomb_runs_out_of_memory(sandbox):
    outcome = sandbox.run_sync("blocks = []\nwhile True:\n    blocks.append(b'x' * 10**7)\n", "", 5)
    assert outcome.status == "memory"


def test_network_is_refused(sandbox):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        tests = f"import socket\ns = socket.socket()\ns.connect(('127.0.0.1', {port}))"
        outcome = sandbox.run_sync("", tests, 5)
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever connected
    assert outcome.status == "error"


def test_writing_to_the_home_folder_is_refused(sandbox, tmp_path):
    target = tmp_path / "learner-home" / "notes.txt"
    target.parent.mkdir()
    outcome = sandbox.run_sync("", f"open({str(target)!r}, 'w').write('gone')", 5)
    assert outcome.status == "error" and not target.exists()


def test_writing_to_a_sibling_folder_with_the_same_prefix_is_refused(sandbox):
    # The sandbox's folder is /tmp/x; /tmp/x-sibling starts with the same characters.
    tests = "import os\nopen(os.getcwd() + '-sibling/notes.txt', 'w').write('gone')"
    outcome = sandbox.run_sync("", tests, 5)
    assert outcome.status == "error"
    if sandbox.isolation == "unsafe":  # elsewhere the open fails by itself, before the hook
        assert "refused by the sandbox: writing to" in outcome.message


def test_inside_compares_whole_folder_names() -> None:
    assert _inside("/tmp/root", "/tmp/root/notes.txt") and _inside("/tmp/root", "notes.txt")
    assert _inside("/tmp/root", "/tmp/root") and _inside("/tmp/root", 3)  # an open descriptor
    assert not _inside("/tmp/root", "/tmp/root2/notes.txt")
    assert not _inside("/tmp/root", "../root2/notes.txt")
    assert not _inside("/tmp/root", b"/tmp/root-x")


def test_writing_inside_the_folder_works(sandbox):
    tests = "open('scratch.txt', 'w').write('ok')\nassert open('scratch.txt').read() == 'ok'"
    assert sandbox.run_sync("", tests, 5).status == "passed"


def test_a_write_loop_cannot_fill_the_disk(sandbox):
    tests = "for i in range(10_000):\n    open(f'f{i}.bin', 'wb').write(b'x' * 1_000_000)"
    outcome = sandbox.run_sync("", tests, 5)
    assert outcome.status == "error" and "more than 64 files" in outcome.message


def test_a_file_over_the_size_limit_is_refused(sandbox):
    outcome = sandbox.run_sync("", "open('big.bin', 'wb').write(b'x' * 5_000_000)", 5)
    assert outcome.status == "error" and "File too large" in outcome.message


def test_processes_are_refused(sandbox):
    outcome = sandbox.run_sync("", "import os\nos.system('true')", 5)
    assert outcome.status == "error" and "refused" in outcome.message


def test_environment_is_empty(sandbox, monkeypatch):
    monkeypatch.setenv("DEEPTUTOR_API_KEY", "sk-must-not-leak")
    tests = "import os\nassert 'DEEPTUTOR_API_KEY' not in os.environ, sorted(os.environ)"
    assert sandbox.run_sync("", tests, 5).status == "passed"


def test_reading_a_file_outside_is_refused_with_bwrap(tmp_path):
    if not bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces on this machine")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    outcome = Sandbox(mode="bwrap").run_sync("", f"print(open({str(secret)!r}).read())", 5)
    assert outcome.status == "error" and "FileNotFoundError" in outcome.message
    assert "top secret" not in outcome.output


async def test_grade_code_turns_the_outcome_into_a_result():
    q = CodeQuestion(id="q4", kind="code", prompt="square", tests="assert f(2) == 4", timeout_s=5)
    right = await grade_code(q, SQUARE, Sandbox(mode="unsafe"))
    assert right.correct and right.graded_by == "tests" and right.feedback == "All tests passed."
    wrong = await grade_code(q, "def f(x):\n    return 2 * x + 1\n", Sandbox(mode="unsafe"))
    assert not wrong.correct and "A test failed (line 1 of the tests" in wrong.feedback
    empty = await grade_code(q, "  ", Sandbox(mode="unsafe"))
    assert not empty.correct


@pytest.mark.parametrize("name", ["sandbox_child.py", "sandbox_confine.py"])
def test_the_child_program_is_standalone(name):
    # The child runs with -I -S from a temp folder: it may import nothing of this package.
    source = (Path(__file__).parents[2] / "deeptutor_jupyter/learning" / name).read_text()
    assert "deeptutor_jupyter" not in source.split('"""')[2]
