"""The Tutor panel in Chinese and its settings, in real JupyterLab and Debian's Chromium: the
learner picks 中文 in JupyterLab's language setting, reloads, and the panel's tabs, buttons and
commands are in Chinese (its own catalog, served through the translations API); a setting
changed in JupyterLab's settings editor takes effect in the open panel at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from deeptutor_jupyter.testing import FakeLLMServer, Reply
from tests.ui.test_lab import (
    ARTIFACTS,
    TOKEN,
    lab_page,
    needs_chromium,
    open_notebook,
    write_notebook,
)
from tests.ui.test_sidebar import open_tutor

pytestmark = pytest.mark.ui

TRACE_MIME = "application/vnd.deeptutor.trace+json"
LANGUAGE_PLUGIN = "@jupyterlab/translation-extension:plugin"
NOTIFICATIONS_PLUGIN = "@jupyterlab/apputils-extension:notification"


def with_saved_turn(path: Path) -> None:
    """A second cell holding a saved turn's trace, as a finished turn leaves it."""
    nb = nbformat.read(path, as_version=4)
    cell = nbformat.v4.new_code_cell("%tutor 什么是特征向量？")
    record = {
        "question": "什么是特征向量？",
        "answer_summary": "矩阵只缩放、不改变方向的向量。",
        "tools": ["read_notebook"],
        "status": "done",
        "model": "custom/fake-model",
    }
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={TRACE_MIME: record, "text/plain": "trace"})
    ]
    nb.cells.append(cell)
    nbformat.write(nb, path)


def wait_for_notebook(page: Any) -> None:
    page.wait_for_function(
        "() => window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60000
    )
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60000)
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")


def switch_to_chinese(page: Any) -> None:
    """What the learner's Settings > Language > 中文 does: the language setting, then a reload."""
    save = "([id, raw]) => window.jupyterapp.serviceManager.settings.save(id, raw)"
    page.evaluate(save, [LANGUAGE_PLUGIN, json.dumps({"locale": "zh_CN"})])
    # Not asked about Jupyter news: that toast would cover the panel in the screenshots.
    page.evaluate(save, [NOTIFICATIONS_PLUGIN, json.dumps({"fetchNews": "false"})])
    page.reload()
    wait_for_notebook(page)


def choose_setting(page: Any, select: str, label: str) -> None:
    """Pick ``label`` in the settings editor, brought to the front first: the notebook beside
    it can become the current tab meanwhile (twice seen, at different steps), hiding the form."""
    page.evaluate(
        "() => window.jupyterapp.commands.execute('settingeditor:open', {query: 'DeepTutor'})"
    )
    page.locator(select).wait_for(state="visible")
    page.locator(select).select_option(label=label)


def panel_placeholder(page: Any) -> str:
    return str(page.locator(".jp-DeepTutorChat-input textarea").get_attribute("placeholder"))


@needs_chromium
def test_the_panel_speaks_chinese_and_follows_its_settings(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    fake_llm.extend([Reply(text="矩阵的秩等于主元的个数。")])
    write_notebook(tmp_path / "week1.ipynb", "1 + 1")
    with_saved_turn(tmp_path / "week1.ipynb")
    with lab_page("i18n-settings-editor") as page:
        page.goto(f"{lab}/lab/tree/week1.ipynb?token={TOKEN}")
        wait_for_notebook(page)
        switch_to_chinese(page)
        lang = page.evaluate("() => document.documentElement.lang")
        page.locator(".jp-DeepTutorTrace").wait_for()
        trace_labels = page.locator(".jp-DeepTutorTrace-label").all_inner_texts()
        trace_meta = page.locator(".jp-DeepTutorTrace-meta").inner_text()

        # The panel's icon in the right sidebar, captioned in Chinese, as a learner finds it.
        page.locator(".jp-SideBar.jp-mod-right .lm-TabBar-tab[title='导师']").click()
        page.locator("#deeptutor-panel").wait_for(state="visible")
        tabs = page.locator(".jp-DeepTutorPanel-tab").all_inner_texts()
        buttons = page.locator("#deeptutor-panel .jp-DeepTutorChat button").all_inner_texts()
        labels = page.evaluate(
            "() => ['deeptutor:open', 'deeptutor:ask-about-cell', 'deeptutor:explain-error']"
            ".map(id => window.jupyterapp.commands.label(id))"
        )
        # The schema is fetched through the panel's transform: its shortcut must still register.
        shortcut = page.evaluate(
            "() => window.jupyterapp.commands.keyBindings"
            ".filter(b => b.command === 'deeptutor:open').map(b => b.keys.join(' '))"
        )
        where = page.locator(".jp-DeepTutorChat-where span").first.inner_text()
        placeholder_before = panel_placeholder(page)
        page.screenshot(path=str(ARTIFACTS / "i18n-panel-zh.png"))

        # The settings editor shows the panel's settings in Chinese; the learner picks Enter.
        page.evaluate(
            "() => window.jupyterapp.commands.execute('settingeditor:open', {query: 'DeepTutor'})"
        )
        form = "#jp-main-dock-panel fieldset[id='jp-SettingsEditor-deeptutor-jupyter:plugin']"
        page.locator(form).wait_for()
        choose_setting(page, f"{form} select[id$='_sendKey']", "Enter")
        page.wait_for_function(
            "() => document.querySelector('.jp-DeepTutorChat-input textarea')"
            "?.placeholder.includes('Enter 发送，Shift+Enter 换行')"
        )
        settings_text = page.locator(form).inner_text()
        page.screenshot(path=str(ARTIFACTS / "i18n-settings-zh.png"))

        # Enter alone now sends the question.
        box = page.locator(".jp-DeepTutorChat-input textarea")
        box.fill("什么是矩阵的秩？")
        box.press("Enter")
        turn = page.locator(".jp-DeepTutorChat-turn[data-status='done']")
        turn.wait_for(timeout=60000)
        turn.get_by_text("矩阵的秩等于主元的个数。").first.wait_for()
        status = turn.locator(".jp-DeepTutorChat-status > span").first.inner_text()
        page.screenshot(path=str(ARTIFACTS / "i18n-chat-zh.png"))
        stored = json.loads(
            page.evaluate(
                "() => window.jupyterapp.serviceManager.settings"
                ".fetch('deeptutor-jupyter:plugin').then(s => s.raw)"
            )
        )

        # The tab shown first, changed in the same editor, switches the open panel.
        choose_setting(page, f"{form} select[id$='_openTab']", "记忆")
        page.locator(".jp-DeepTutorPanel-tab.jp-mod-active", has_text="记忆").wait_for()
        active = page.locator(".jp-DeepTutorPanel-tab.jp-mod-active").inner_text()
    assert lang.startswith("zh")
    assert labels == ["导师：打开", "向导师询问这个单元格", "解释这个错误"]  # palette, context menu
    assert trace_labels == ["问题", "回答", "工具"]  # the saved-turn card (the MIME renderer)
    assert trace_meta == "custom/fake-model · 完成"
    assert tabs == ["对话", "待回答", "记忆", "知识库", "进度"]
    assert "新建" in buttons and "提问" in buttons
    assert shortcut == ["Ctrl Shift U"]
    assert where == "笔记本：week1.ipynb"
    assert placeholder_before == "向导师提问（Shift+Enter 发送）"
    assert "发送问题的按键" in settings_text and "跟随当前笔记本" in settings_text
    assert stored["sendKey"] == "Enter"
    assert status == "完成"
    assert active == "记忆"
    asked = [m for r in fake_llm.requests for m in r.body["messages"] if m["role"] == "user"]
    assert any("什么是矩阵的秩？" in json.dumps(m, ensure_ascii=False) for m in asked)


def active_tab(page: Any) -> str:
    return str(page.locator(".jp-DeepTutorPanel-tab.jp-mod-active").inner_text())


def where(page: Any) -> str:
    return str(page.locator(".jp-DeepTutorChat-where span").first.inner_text())


@needs_chromium
def test_saved_settings_apply_at_start_and_a_panel_that_does_not_follow_stays(
    lab: str, tmp_path: Path
) -> None:
    write_notebook(tmp_path / "a.ipynb", "1 + 1")
    write_notebook(tmp_path / "b.ipynb", "2 + 2")
    # The learner's settings as the settings editor saved them in an earlier session.
    saved = tmp_path / "jupyter-config" / "lab" / "user-settings" / "deeptutor-jupyter"
    saved.mkdir(parents=True)
    (saved / "plugin.jupyterlab-settings").write_text(
        json.dumps({"followNotebook": False, "openTab": "pending"})
    )
    with lab_page("settings-follow") as page:
        open_notebook(page, lab, "a.ipynb")
        open_tutor(page)
        page.locator(".jp-DeepTutorPanel-tab.jp-mod-active", has_text="Pending").wait_for()
        first = active_tab(page)
        page.locator(".jp-DeepTutorPanel-tab", has_text="Chat").click()
        with_a = where(page)
        page.evaluate(
            "() => window.jupyterapp.commands.execute('docmanager:open', {path: 'b.ipynb'})"
        )
        page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget?.title.label === 'b.ipynb'"
        )
        page.wait_for_selector(
            ".jp-NotebookPanel:not(.lm-mod-hidden) "
            ".jp-Notebook-ExecutionIndicator[data-status='idle']",
            timeout=60000,
        )
        after_switch = where(page)
        # Asking about a cell of b is asking in b: the panel goes with the question.
        page.evaluate("() => window.jupyterapp.commands.execute('deeptutor:ask-about-cell')")
        page.locator(".jp-DeepTutorChat-where span", has_text="Notebook: b.ipynb").wait_for()
        # The cell goes as an attachment chip (read in b's kernel when asked).
        chip = page.locator(".jp-DeepTutorChat-chip").first.inner_text()
    assert first == "Pending"
    assert with_a == "Notebook: a.ipynb"
    assert after_switch == "Notebook: a.ipynb"  # b has the focus; the panel stayed with a
    assert chip.startswith("Cell (not run): 2 + 2")


@needs_chromium
def test_a_cell_form_speaks_jupyterlabs_language_without_a_language_flag(
    lab: str, fake_llm: FakeLLMServer, tmp_path: Path
) -> None:
    """JupyterLab in Chinese: the quiz a `%tutor` cell shows is in Chinese, though nobody set
    `--language` (the labextension reported JupyterLab's language to the server)."""
    from deeptutor_jupyter.testing import ToolCallSpec

    quiz = {
        "title": "平方",
        "objective": "squares",
        "questions": [
            {
                "id": "q1",
                "kind": "choice",
                "prompt": "`2**2` 等于多少？",
                "options": [{"id": "a", "label": "2"}, {"id": "b", "label": "4"}],
                "answer": ["b"],
            }
        ],
    }
    fake_llm.extend([Reply(text="小测验。", tool_calls=[ToolCallSpec("make_quiz", quiz)])])
    write_notebook(tmp_path / "zh.ipynb", "%load_ext deeptutor_jupyter", "%tutor 考考我")
    with lab_page("i18n-cell-form-zh") as page:
        page.goto(f"{lab}/lab/tree/zh.ipynb?token={TOKEN}")
        wait_for_notebook(page)
        switch_to_chinese(page)
        # After the reload the indicator can read idle before the notebook is the shell's
        # current widget with a ready kernel; run-all then has no notebook to run (seen once).
        page.wait_for_function(
            """() => {
              const context = window.jupyterapp.shell.currentWidget?.sessionContext;
              return context?.isReady && context.session?.kernel?.status === 'idle';
            }""",
            timeout=60000,
        )
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        submit = page.locator(".dt-quiz-submit")
        submit.wait_for(timeout=60000)
        words = submit.inner_text()
        prompt_code = page.locator(".dt-quiz-prompt code").inner_text()
        submit.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "i18n-cell-quiz-zh.png"))
    assert words == "提交答案"
    assert prompt_code == "2**2"  # code in a prompt renders as code (issue 21, smaller)
    assert (tmp_path / "home" / "jupyterlab-language").read_text().strip() == "zh"
