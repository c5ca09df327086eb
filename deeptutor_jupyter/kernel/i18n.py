"""Every string a learner reads in the kernel's views, in English and Chinese: one table, one
rule. A key missing in a language falls back to its English text, key by key; the forms' and
cards' own texts live beside them (``widgets/*_strings.py``, data only) and join this table under
a prefix (``ask.``, ``memory.``, ``setup.``, ``forget.``, ``quiz.``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "starting": "starting…",
        "thinking": "Thinking",
        "answering": "answering…",
        "compacted": "earlier turns summarised",
        "using_tool": "using {name}…",
        "running": "running…",
        "done": "done",
        "tool_error": "error",
        "round": "round",
        "stop": "Stop",
        "status_done": "done",
        "status_error": "failed",
        "status_cancelled": "stopped",
        "error_title": "What happened:",
        "how_to_fix": "How to fix:",
        "stopped_by_learner": "Stopped by the learner.",
        "superseded": "Stopped because the cell ran again.",
        "waiting_for_answer": "waiting for your answer…",
        "reading_attachments": "Reading the attachments…",
        "read_attachments": "Notes from the attachments",
        "no_pending": "No questions are waiting for an answer.",
        "pending_title": "Waiting for your answer:",
        "waiting_saved": (
            "The tutor asked: **{title}** It waits for your answer. _If the kernel has "
            "restarted since, run `%tutor pending` to answer it; the tutor continues from here._"
        ),
        "pending_saved": (
            "**Waiting for your answer:** {title}\n\n_If this form does not show (the kernel "
            "restarted), run `%tutor pending` again to answer it._"
        ),
        "retrying_in": "{reason}, retrying in {seconds} s",
        "attach_outside": "{path} is outside the folder Jupyter serves; it was not read.",
        "attach_folder": "{path} is a folder; attach the files in it one by one.",
        "attach_missing": "There is no file {path}.",
        "attach_binary": "{path} is not a text file; the tutor reads text files only.",
        "attach_empty_cell": "That cell is empty: there is nothing to show the tutor.",
        "attach_bad_root": "{path} is not a notebook path from the server's root.",
        "attach_not_here": "{path} is not where this kernel's notebook is ({real}); no file "
        "was read.",
        "view_failed": (
            "**This cell could not show the tutor's view** ({error}). The turn goes on and "
            "its answer is kept: the Tutor panel shows it."
        ),
    },
    "zh": {
        "starting": "正在开始…",
        "thinking": "思考过程",
        "answering": "正在回答…",
        "compacted": "较早的对话已摘要",
        "using_tool": "正在使用 {name}…",
        "running": "运行中…",
        "done": "完成",
        "tool_error": "出错",
        "round": "第",
        "stop": "停止",
        "status_done": "完成",
        "status_error": "失败",
        "status_cancelled": "已停止",
        "error_title": "发生了什么：",
        "how_to_fix": "如何解决：",
        "stopped_by_learner": "已由学习者停止。",
        "superseded": "单元格重新运行，上一轮已停止。",
        "waiting_for_answer": "等待你的回答…",
        "reading_attachments": "正在阅读附件…",
        "read_attachments": "附件笔记",
        "no_pending": "没有等待回答的问题。",
        "pending_title": "等待你的回答：",
        "waiting_saved": (
            "导师提问：**{title}** 正在等待你的回答。_如果内核已重启，请运行 `%tutor pending` "
            "回答；导师会从这里继续。_"
        ),
        "pending_saved": (
            "**等待你的回答：** {title}\n\n"
            "_如果表单没有显示（内核已重启），请再次运行 `%tutor pending` 回答。_"
        ),
        "retrying_in": "{reason}，{seconds} 秒后重试",
        "attach_outside": "{path} 不在 Jupyter 提供的文件夹内，未读取。",
        "attach_folder": "{path} 是文件夹；请逐个附加其中的文件。",
        "attach_missing": "没有文件 {path}。",
        "attach_binary": "{path} 不是文本文件；导师只读取文本文件。",
        "attach_empty_cell": "这个单元格是空的，没有可以给导师看的内容。",
        "attach_bad_root": "{path} 不是从服务器根目录开始的笔记本路径。",
        "attach_not_here": "{path} 不是本内核笔记本所在的位置（{real}）；未读取任何文件。",
        "view_failed": (
            "**此单元格无法显示导师视图**（{error}）。本轮对话仍在继续，回答会被保存："
            "导师面板中可以看到。"
        ),
    },
}


_joined = False


def _table() -> dict[str, dict[str, str]]:
    global _joined
    if not _joined:
        from deeptutor_jupyter.kernel.widgets import (
            ask_user_strings,
            forget_strings,
            memory_workbench_strings,
            quiz_strings,
            setup_strings,
        )

        for prefix, texts in (
            ("ask", ask_user_strings.TEXTS),
            ("memory", memory_workbench_strings.TEXTS),
            ("setup", setup_strings.TEXTS),
            ("forget", forget_strings.TEXTS),
            ("quiz", quiz_strings.TEXTS),
        ):
            for language, table in texts.items():
                _STRINGS.setdefault(language, {}).update(
                    {f"{prefix}.{key}": text for key, text in table.items()}
                )
        _joined = True
    return _STRINGS


def t(key: str, language: str = "en") -> str:
    """The text of ``key`` in ``language``; English where that language lacks the key."""
    table = _table()
    return table.get(language, {}).get(key) or table["en"].get(key, key)


def text(prefix: str, key: str, language: str = "en") -> str:
    """``t`` within one view's prefix; an unknown key reads as itself, unprefixed."""
    full = f"{prefix}.{key}"
    found = t(full, language)
    return key if found == full else found


class Texts(Mapping[str, str]):
    """One prefix of the table as a mapping (``texts["title"]``), with the same fallback."""

    def __init__(self, prefix: str, language: str) -> None:
        self.prefix, self.language = prefix, language

    def __getitem__(self, key: str) -> str:
        return text(self.prefix, key, self.language)

    def __iter__(self) -> Iterator[str]:
        start = f"{self.prefix}."
        return (k[len(start) :] for k in _table()["en"] if k.startswith(start))

    def __len__(self) -> int:
        return sum(1 for _ in self)
