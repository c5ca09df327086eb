"""``%tutor kb`` and ``%tutor memory`` read their lines with IPython's magic argparse."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from IPython.core.magic_arguments import MagicArgumentParser

from deeptutor_jupyter.kernel.commands import kb_parser, memory_parser, read_args


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", {"verb": None}),
        ("list", {"verb": "list"}),
        (
            "add course 'week 1' notes.md",
            {"verb": "add", "name": "course", "paths": ["week 1", "notes.md"]},
        ),
        ("refresh course", {"verb": "refresh", "name": "course", "paths": []}),
        (
            "refresh course notes/week1.md 'week 2'",
            {"verb": "refresh", "name": "course", "paths": ["notes/week1.md", "week 2"]},
        ),
        ("remove course", {"verb": "remove", "name": "course"}),
    ],
)
def test_kb_lines(line: str, expected: dict[str, object]) -> None:
    assert vars(read_args(kb_parser(), line)) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", {"verb": None}),
        ("import lessons/", {"verb": "import", "path": "lessons/"}),
        ("export", {"verb": "export", "file": None}),
        ("forget --all", {"verb": "forget", "all": True}),
        ("consolidate", {"verb": "consolidate", "mode": "update", "doc": "L3/profile"}),
        (
            "consolidate --doc L2/notebook --mode dedup",
            {"verb": "consolidate", "mode": "dedup", "doc": "L2/notebook"},
        ),
    ],
)
def test_memory_lines(line: str, expected: dict[str, object]) -> None:
    assert vars(read_args(memory_parser(), line)) == expected


@pytest.mark.parametrize(
    ("parser", "line", "problem"),
    [
        (kb_parser, "add course", "required: paths"),
        (kb_parser, "remove", "required: name"),
        (kb_parser, "list extra", "unrecognized arguments: extra"),
        (kb_parser, "add 'unclosed", "Could not read the arguments"),
        (memory_parser, "consolidate --doc profile", "'profile' is not LAYER/KEY"),
        (memory_parser, "forget", "required: --all"),
        (memory_parser, "wipe", "invalid choice: 'wipe'"),
    ],
)
def test_bad_lines_say_what_is_wrong(
    parser: Callable[[], MagicArgumentParser], line: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        read_args(parser(), line)
