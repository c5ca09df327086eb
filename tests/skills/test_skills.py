"""Skill layers, the prompt manifest, always-on bodies, read_skill caps and path escapes."""

from __future__ import annotations

import importlib.resources
import json
import os
from pathlib import Path

import pytest

from deeptutor_jupyter.providers.base import ToolCall
from deeptutor_jupyter.skills import (
    ReadSkillTool,
    SkillError,
    always_blocks,
    discover_skills,
    read_skill,
    scan_skills,
    skills_manifest,
)
from deeptutor_jupyter.skills._frontmatter import FrontMatterError, split_front_matter
from deeptutor_jupyter.tools.base import ToolContext, ToolDeps
from deeptutor_jupyter.tools.registry import ToolRegistry


def make_skill(parent: Path, folder: str, front: str, body: str = "Body.") -> Path:
    root = parent / folder
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text(f"---\n{front}\n---\n\n{body}\n", encoding="utf-8")
    return root


def test_builtin_skills_ship_as_package_data() -> None:
    builtin = importlib.resources.files("deeptutor_jupyter.skills") / "builtin"
    for name in ("socratic-hints", "worked-example"):
        text = (builtin / name / "SKILL.md").read_text(encoding="utf-8")
        assert f"name: {name}" in text
    skills = discover_skills(course_dir=None, user_dir=None)
    assert {"socratic-hints", "worked-example"} <= set(skills)
    assert all(s.layer == "builtin" and not s.always for s in skills.values())
    assert "Never write the full solution" in read_skill(skills, "socratic-hints")


def test_layers_shadow_by_name(tmp_path: Path) -> None:
    course, user = tmp_path / "course", tmp_path / "user"
    make_skill(course, "socratic-hints", "name: socratic-hints\ndescription: Course version")
    make_skill(course, "lab-rules", "name: lab-rules\ndescription: Course rules")
    make_skill(user, "lab-rules-mine", "name: lab-rules\ndescription: My rules", body="Mine.")
    scan = scan_skills(course_dir=course, user_dir=user)
    skills = scan.skills
    assert skills["socratic-hints"].layer == "course"
    assert skills["socratic-hints"].description == "Course version"
    assert skills["lab-rules"].layer == "user" and read_skill(skills, "lab-rules") == "Mine."
    assert skills["worked-example"].layer == "builtin"
    assert sorted((s.name, s.layer) for s in scan.shadowed) == [
        ("lab-rules", "course"),
        ("socratic-hints", "builtin"),
    ]
    assert scan.warnings == []


@pytest.mark.parametrize(
    ("front", "reason"),
    [
        ("description: no name", "'name'"),
        ("name: x", "'description'"),
        ("name: bad name!\ndescription: d", "'name'"),
        ("name: x\ndescription: d\nalways: maybe", "'always'"),
        ("name: x\n  description: d", "cannot read"),
    ],
)
def test_malformed_skills_are_skipped_with_a_warning(
    tmp_path: Path, front: str, reason: str
) -> None:
    make_skill(tmp_path, "broken", front)
    make_skill(tmp_path, "fine", "name: fine\ndescription: ok")
    scan = scan_skills(course_dir=tmp_path, user_dir=None, builtin_dir=None)
    assert list(scan.skills) == ["fine"]
    (warning,) = scan.warnings
    assert "broken" in warning and reason in warning


def test_missing_front_matter_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "SKILL.md").write_text("# no front matter\n", encoding="utf-8")
    (tmp_path / "not-a-skill").mkdir()
    scan = scan_skills(course_dir=None, user_dir=tmp_path, builtin_dir=None)
    assert scan.skills == {} and "does not start with" in scan.warnings[0]


def test_front_matter_forms() -> None:
    meta, body = split_front_matter(
        "---\nname: 'x'\ntags:\n  - a\n  - \"b\"\ndescription: >\n  folded\n  text\n"
        "always: true\nnotes: |\n  one\n  two\n# comment\n---\nBody\n"
    )
    assert meta == {
        "name": "x",
        "tags": ["a", "b"],
        "description": "folded text\n",  # YAML block scalars keep their final newline
        "always": True,
        "notes": "one\ntwo\n",
    }
    assert body == "Body"
    assert split_front_matter("---\ntags: []\n---\n")[0] == {"tags": []}
    with pytest.raises(FrontMatterError, match="not closed"):
        split_front_matter("---\nname: x\n")


def test_nested_front_matter_is_read_not_refused(tmp_path: Path) -> None:
    meta, _body = split_front_matter(
        "---\nname: x\ndescription: 'Quoted: with a colon'\n"
        "metadata:\n  author: Ms. Lee\n  version: 2\n---\nBody\n"
    )
    assert meta["metadata"] == {"author": "Ms. Lee", "version": 2}
    assert meta["description"] == "Quoted: with a colon"
    make_skill(tmp_path, "nested", "name: nested\ndescription: d\nmetadata:\n  a: 1")
    assert "nested" in discover_skills(course_dir=tmp_path, user_dir=None)
    with pytest.raises(FrontMatterError, match="cannot read"):
        split_front_matter("---\nname: [unclosed\n---\n")
    with pytest.raises(FrontMatterError, match="key: value"):
        split_front_matter("---\n- just\n- a list\n---\n")


def test_manifest_has_one_line_per_skill(tmp_path: Path) -> None:
    long = "word " * 100
    make_skill(tmp_path, "a", f"name: alpha\ndescription: {long}\ntags: x, y")
    make_skill(tmp_path, "b", "name: beta\ndescription: House rules.\nalways: true")
    skills = discover_skills(course_dir=tmp_path, user_dir=None)
    lines = skills_manifest(skills).splitlines()
    assert len(lines) == len(skills)
    alpha = next(line for line in lines if line.startswith("- alpha:"))
    assert alpha.endswith("… [x, y]") and len(alpha) < 230
    assert "- beta: House rules. (always on)" in lines
    assert skills_manifest({}) == ""


def test_always_bodies_are_injected_with_a_cap(tmp_path: Path) -> None:
    make_skill(tmp_path, "rules", "name: rules\ndescription: d\nalways: true", body="R" * 50)
    make_skill(tmp_path, "other", "name: other\ndescription: d")
    skills = discover_skills(course_dir=None, user_dir=tmp_path)
    (block,) = always_blocks(skills)
    assert block == "## Skill: rules\n\n" + "R" * 50
    (short,) = always_blocks(skills, cap=10)
    assert short.startswith("## Skill: rules\n\nRRRRRRRRRR\n\n[… skill 'rules' cut at 10 of 50")


@pytest.fixture
def skills(tmp_path: Path):  # type: ignore[no-untyped-def]
    root = make_skill(tmp_path / "user", "demo", "name: demo\ndescription: d", body="B" * 100)
    (root / "references").mkdir()
    (root / "references" / "guide.md").write_text("G" * 20_000, encoding="utf-8")
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    return discover_skills(course_dir=None, user_dir=tmp_path / "user")


def test_read_skill_files_and_caps(skills) -> None:  # type: ignore[no-untyped-def]
    body = read_skill(skills, "demo")
    assert body.startswith("B" * 100)
    assert "references/guide.md" in body and "binary.bin" in body
    guide = read_skill(skills, "demo", "references/guide.md", cap=1000)
    assert guide.startswith("G" * 1000) and "cut at 1000 of 20000 characters" in guide
    assert read_skill(skills, "demo", "SKILL.md") == read_skill(skills, "demo")
    with pytest.raises(SkillError, match="not a text file"):
        read_skill(skills, "demo", "binary.bin")
    with pytest.raises(SkillError, match=r"No file 'nope\.md'"):
        read_skill(skills, "demo", "nope.md")
    with pytest.raises(SkillError, match=r"Unknown skill 'ghost'.*demo"):
        read_skill(skills, "ghost")


@pytest.mark.parametrize(
    "file",
    ["../../secret.txt", "references/../../secret.txt", "..\\secret.txt", "/etc/passwd", "C:/x"],
)
def test_paths_escaping_the_skill_are_refused(skills, file: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SkillError, match="Refused"):
        read_skill(skills, "demo", file)


def test_symlinks_out_of_the_skill_are_refused(skills, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = skills["demo"].root
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    os.symlink(tmp_path, root / "linkdir")
    for file in ("link.txt", "linkdir/secret.txt"):
        with pytest.raises(SkillError, match="points outside"):
            read_skill(skills, "demo", file)
    os.symlink(root / "references" / "guide.md", root / "inner.md")
    assert read_skill(skills, "demo", "inner.md", cap=5).startswith("GGGGG")


async def test_read_skill_tool(skills, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    registry = ToolRegistry([ReadSkillTool(cap=50)])
    ctx = ToolContext("s", "t", tmp_path, deps=ToolDeps(skills=skills))
    args = {"name": "demo", "file": "references/guide.md"}
    result = await registry.execute(ToolCall("1", "read_skill", json.dumps(args)), ctx)
    assert not result.is_error and result.content.startswith("G" * 50)
    assert result.summary == "read skill demo/references/guide.md"
    result = await registry.execute(
        ToolCall("2", "read_skill", json.dumps({"name": "demo", "file": "../x"})), ctx
    )
    assert result.is_error and "Refused" in result.content
    schema = ReadSkillTool.schema()["function"]["parameters"]
    assert schema["required"] == ["name"] and set(schema["properties"]) == {"name", "file"}


async def test_read_skill_tool_discovers_when_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    course = tmp_path / "course"
    make_skill(course, "c", "name: course-only\ndescription: d", body="From the course.")
    make_skill(tmp_path / "home" / "skills", "u", "name: mine\ndescription: d", body="Mine.")
    monkeypatch.setenv("DEEPTUTOR_COURSE_DIR", str(course))
    ctx = ToolContext("s", "t", tmp_path, deps=ToolDeps(home=tmp_path / "home"))
    registry = ToolRegistry([ReadSkillTool()])
    for name, text in (("course-only", "From the course."), ("mine", "Mine.")):
        call = ToolCall("1", "read_skill", json.dumps({"name": name}))
        assert (await registry.execute(call, ctx)).content == text
