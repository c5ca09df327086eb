"""The magic's parsing, its help, and the transformer that keeps '?' questions questions."""

from __future__ import annotations

import re

import pytest
from IPython.core.inputtransformer2 import TransformerManager
from IPython.core.interactiveshell import InteractiveShell

from deeptutor_jupyter.kernel import magics
from deeptutor_jupyter.kernel.magics import (
    UsageError,
    help_text,
    keep_question_marks,
    parse,
    shown_words,
)


@pytest.mark.parametrize(
    ("line", "cell", "flags", "new", "question", "command"),
    [
        ("What is an eigenvector?", None, {}, False, "What is an eigenvector?", None),
        ("--new Is x -- y ok?", None, {}, True, "Is x -- y ok?", None),
        (
            "--model deepseek-chat --max-rounds=3 why so",
            None,
            {"model": "deepseek-chat", "max_rounds": "3"},
            False,
            "why so",
            None,
        ),
        (
            "--model m",
            "Here is my proof\n--- where does it fail?",
            {"model": "m"},
            False,
            "Here is my proof\n--- where does it fail?",
            None,
        ),
        ("config", None, {}, False, "", "config"),
        ("config my settings please", None, {}, False, "config my settings please", None),
        ("stop", None, {}, False, "", "stop"),
        ("why", None, {}, False, "", "why"),
        ("pending --all", None, {}, False, "", "pending"),
        ("stop being so verbose", None, {}, False, "stop being so verbose", None),
    ],
)
def test_parse(line, cell, flags, new, question, command):
    p = parse(line, cell)
    assert (p.flags, p.new, p.question, p.command) == (flags, new, question, command)


@pytest.mark.parametrize(
    ("line", "cell", "message"),
    [
        ("--modle x hi", None, "Unknown flag --modle"),
        ("--model", None, "--model needs a value"),
        ("--model m stray words", "body", "Unexpected text"),
    ],
)
def test_parse_errors_say_what_is_wrong(line, cell, message):
    with pytest.raises(UsageError, match=message) as info:
        parse(line, cell)
    assert help_text() in str(info.value)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "%tutor What is an eigenvector, intuitively?\n",
            "get_ipython().run_line_magic('tutor', 'What is an eigenvector, intuitively?')\n",
        ),
        ("%tutor What is 6*7?\n", "get_ipython().run_line_magic('tutor', 'What is 6*7?')\n"),
        ("x = 1\n    %tutor why?\n", "x = 1\n    get_ipython().run_line_magic('tutor', 'why?')\n"),
        (
            '%tutor it\'s "quoted"?\n',
            "get_ipython().run_line_magic('tutor', 'it\\'s \"quoted\"?')\n",
        ),
    ],
)
def test_questions_ending_in_a_question_mark_stay_questions(source, expected):
    tm = TransformerManager()
    tm.cleanup_transforms.append(keep_question_marks)
    assert tm.transform_cell(source) == expected


def test_help_lookup_still_works():
    tm = TransformerManager()
    tm.cleanup_transforms.append(keep_question_marks)
    assert "pinfo" in tm.transform_cell("%tutor?\n")
    assert "pinfo2" in tm.transform_cell("%tutor??\n")


def test_load_and_unload_extension_in_a_shell():
    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "deeptutor_jupyter")
        assert "tutor" in shell.magics_manager.magics["line"]
        assert "tutor" in shell.magics_manager.magics["cell"]
        assert keep_question_marks in shell.input_transformers_cleanup
        doc = shell.magics_manager.magics["line"]["tutor"].__doc__
        assert doc == help_text() and "%tutor config" in doc
        shell.run_line_magic("unload_ext", "deeptutor_jupyter")
        assert keep_question_marks not in shell.input_transformers_cleanup
    finally:
        InteractiveShell.clear_instance()


def test_help_is_one_text_listing_every_command():
    text = help_text()
    for name, command in magics.COMMANDS.items():
        assert f"%tutor {command.usage}" in text, name
    for flag in magics._FLAGS:
        assert flag in text, flag
    assert {"help", "config", "why", "stop", "pending", "memory", "kb"} <= set(magics.COMMANDS)


def test_help_and_the_question_mark_show_the_same_text_and_a_new_command_joins_both():
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    seen: list[str] = []
    try:
        shell.run_line_magic("load_ext", "deeptutor_jupyter")

        @magics.command("review", "review [--due]", "cards due for review", args={"--due"})
        def _review(_magics, call):
            seen.append(",".join(sorted(call.parsed.args)) or "-")

        with capture_output() as shown:
            shell.run_line_magic("tutor", "help")
            shell.run_line_magic("tutor", "")
        printed = [o.data["text/markdown"] for o in shown.outputs]
        assert printed == [f"```\n{help_text()}```"] * 2
        assert re.search(r"%tutor review \[--due\] +cards due for review", help_text())
        assert shell.magics_manager.magics["line"]["tutor"].__doc__ == help_text()
        shell.run_line_magic("tutor", "review --due")
        shell.run_line_magic("tutor", "review")
        assert seen == ["--due", "-"]
        assert parse("review my proof please", None).question == "review my proof please"
    finally:
        magics.COMMANDS.pop("review", None)
        magics._refresh_docstring()
        shell.run_line_magic("unload_ext", "deeptutor_jupyter")
        InteractiveShell.clear_instance()


@pytest.mark.parametrize(
    ("line", "cell_index", "shown"),
    [
        ("why", None, "Explain my last error."),
        ("--cell 3 why does it fail?", "3", "why does it fail? (cell [3])"),
        ("--cell [4]", "[4]", "Can you help me with this cell? (cell [4])"),
        ("What is a rank?", None, None),  # the learner's words are what is sent
    ],
)
def test_a_composed_question_is_shown_in_the_learners_words(line, cell_index, shown):
    parsed = parse(line, None)
    parsed.flags.pop("cell", None)
    assert shown_words(parsed, cell_index) == shown
