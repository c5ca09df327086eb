"""Flat front matter is read without PyYAML, and always as PyYAML reads it (skills/_frontmatter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from deeptutor_jupyter.skills._frontmatter import _flat, split_front_matter

# Read without YAML: each must come out exactly as yaml.safe_load reads it.
FLAT = [
    "name: socratic-hints",
    'description: Guide a learner with questions; use for "I\'m stuck" requests, not tests.',
    "tags: [pedagogy, exercises, hints]\nalways: false",
    "always: true",
    "tags: []",
    "tags: [ a , b-2 ]",
    "name: C# and F#, [brackets] {braces} and 100% 'quotes'",
    "name:   spaced   words   ",
    "_private: x",
    "",
]
# Left to YAML: numbers, dates, quoted and special words, comments, colons, nesting, blanks...
TO_YAML = [
    "version: 1.0",
    "when: 2026-12-05",
    "name: 'quoted'",
    'name: "quoted"',
    "always: True",
    "always: yes",
    "always: on",
    "name: null",
    "name: ~",
    "name: ",
    "name:",
    "name:x",
    "on: x",
    "Y: x",
    "name: a # comment",
    "# comment\nname: x",
    "name: a: b",
    "name: ends:",
    "name: x\n\nother: y",
    "name: x\n  continued",
    "name: x\nname: y",
    "tags: [a, , b]",
    "tags: [a b]",
    "tags: [on, off]",
    "tags: [1, 2]",
    "tags: [a, b,]",
    "metadata: {author: me}",
    "tags:\n  - a",
    "name: .inf",
    "name: -x",
    "name: &anchor x",
    "name: tab\there",
    "name: nbsp\u00a0here",
    "name:\tx",
    "name: Ünïcode",
]


@pytest.mark.parametrize("front", FLAT)
def test_flat_front_matter_reads_as_yaml_does(front: str) -> None:
    lines = front.splitlines()
    assert _flat(lines) is not None  # taken without YAML
    expected = yaml.safe_load(front) or {}
    assert split_front_matter(f"---\n{front}\n---\nBody")[0] == expected
    assert json.dumps(_flat(lines)) == json.dumps(expected)  # types too: True is not "true"


@pytest.mark.parametrize("front", TO_YAML)
def test_anything_else_is_left_to_yaml(front: str) -> None:
    assert _flat(front.splitlines()) is None


def test_the_builtin_skills_need_no_yaml() -> None:
    # PyYAML cannot even be imported here: a first turn reads the shipped skills without it.
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "from deeptutor_jupyter.skills import discover_skills\n"
        "print(sorted(discover_skills(course_dir=None, user_dir=None)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['socratic-hints', 'worked-example']"
