"""The panel's catalogs are complete: every `__('...')` text of labextension/src and every title
and description of the plugin's settings schema has a zh_CN translation, and the Jed .json that
JupyterLab serves is what the .po source generates (scripts/i18n_catalog.py --check)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "i18n_catalog.py"
PO = Path("deeptutor_jupyter/locale/zh_CN/LC_MESSAGES/deeptutor_jupyter.po")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def copy_repo(tmp_path: Path) -> Path:
    """The parts the script reads, in a scratch repository the tests may spoil."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "labextension" / "src", root / "labextension" / "src")
    shutil.copytree(ROOT / "labextension" / "schema", root / "labextension" / "schema")
    shutil.copytree(ROOT / PO.parent, root / PO.parent)
    return root


def test_the_shipped_catalog_is_complete_and_current() -> None:
    checked = run("--check")
    assert checked.returncode == 0, checked.stderr


def test_a_new_panel_string_without_chinese_fails_the_check(tmp_path: Path) -> None:
    root = copy_repo(tmp_path)
    tabs = root / "labextension" / "src" / "tabs.tsx"
    tabs.write_text(
        tabs.read_text(encoding="utf-8") + "\nexport const x = () => __('Forget everything');\n",
        encoding="utf-8",
    )
    checked = run("--check", "--root", str(root))
    assert checked.returncode == 1
    assert "'Forget everything' (tabs.tsx:" in checked.stderr
    # --add appends it untranslated: still failing until someone writes the Chinese.
    assert run("--add", "--root", str(root)).returncode == 0
    assert 'msgid "Forget everything"\nmsgstr ""' in (root / PO).read_text(encoding="utf-8")
    assert run("--check", "--root", str(root)).returncode == 1


def test_a_new_setting_title_needs_chinese_too(tmp_path: Path) -> None:
    root = copy_repo(tmp_path)
    schema_path = root / "labextension" / "schema" / "plugin.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    schema["properties"]["fontSize"] = {"title": "Font size", "type": "number"}
    schema_path.write_text(json.dumps(schema), encoding="utf-8")
    checked = run("--check", "--root", str(root))
    assert checked.returncode == 1
    assert "'Font size' (plugin.json/properties/fontSize/title)" in checked.stderr


def test_a_text_that_is_not_one_literal_cannot_be_checked(tmp_path: Path) -> None:
    root = copy_repo(tmp_path)
    chat = root / "labextension" / "src" / "chat.ts"
    chat.write_text(
        chat.read_text(encoding="utf-8") + "\nexport const y = (n: string) => __(`Hi ${n}`);\n",
        encoding="utf-8",
    )
    checked = run("--check", "--root", str(root))
    assert checked.returncode == 1
    assert "chat.ts:" in checked.stderr and "one string literal" in checked.stderr


def test_an_edited_po_without_regenerating_the_json_fails(tmp_path: Path) -> None:
    root = copy_repo(tmp_path)
    po = root / PO
    po.write_text(
        po.read_text(encoding="utf-8").replace('msgstr "停止"', 'msgstr "停"'), encoding="utf-8"
    )
    stale = run("--check", "--root", str(root))
    assert stale.returncode == 1 and "is not what" in stale.stderr
    assert run("--root", str(root)).returncode == 0
    data = json.loads(po.with_suffix(".json").read_text(encoding="utf-8"))
    assert data["Stop"] == ["停"]
    assert run("--check", "--root", str(root)).returncode == 0


def test_an_entry_no_source_uses_is_reported(tmp_path: Path) -> None:
    root = copy_repo(tmp_path)
    po = root / PO
    po.write_text(
        po.read_text(encoding="utf-8") + '\nmsgid "Gone"\nmsgstr "没了"\n', encoding="utf-8"
    )
    checked = run("--check", "--root", str(root))
    assert checked.returncode == 1 and "obsolete entry 'Gone'" in checked.stderr


def test_escaped_source_text_matches_its_runtime_value() -> None:
    # The panel writes '\u2026' in source; the msgid is the character the browser looks up.
    data = json.loads((ROOT / PO.with_suffix(".json")).read_text(encoding="utf-8"))
    assert data["Answering…"] == ["正在回答…"]
    assert data["The tutor is not connected to this notebook’s kernel."]


def test_no_message_counts_with_an_s_in_brackets():
    """English counts agree with their word (deeptutor_jupyter/words.py), never "card(s)"."""
    import ast
    import re

    package = Path(__file__).resolve().parents[1] / "deeptutor_jupyter"
    found = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.search(r"[a-z]\(s\)", node.value.replace("http(s)", ""))
    ]
    assert found == []


# Characters shown as emoji by default (Unicode Emoji_Presentation, the ranges the tutor could
# use): without a colour-emoji font, as on a fresh Debian, they show as empty boxes.
EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u231a\u231b\u23e9-\u23fa\u25fd\u25fe\u2614\u2615\u2648-\u2653"
    "\u267f\u2693\u26a1\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea\u26f2\u26f3"
    "\u26f5\u26fa\u26fd\u2705\u270a\u270b\u2728\u274c\u274e\u2753-\u2755\u2757\u2795-\u2797"
    "\u27b0\u27bf\u2b1b\u2b1c\u2b50\u2b55\ufe0f]"
)


def test_no_emoji_in_what_a_learner_reads():
    """The kernel's outputs, the panel and its catalog use marks every font has (✓ ✗ ⚠ ▶ ★)."""
    import ast

    package = ROOT / "deeptutor_jupyter"
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and EMOJI.search(node.value)
    ]
    panel = [*(ROOT / "labextension" / "src").glob("*.ts*"), ROOT / PO]
    found += [
        f"{path.relative_to(ROOT)}:{number}"
        for path in panel
        if not path.name.endswith(".test.ts")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if EMOJI.search(line)
    ]
    assert found == []
