"""The strings a learner reads in the turn view, in English and Chinese."""

from __future__ import annotations

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
        "retrying_in": "{reason}, retrying in {seconds} s",
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
        "retrying_in": "{reason}，{seconds} 秒后重试",
    },
}


def t(key: str, language: str = "en") -> str:
    table = _STRINGS.get(language, _STRINGS["en"])
    return table.get(key) or _STRINGS["en"].get(key, key)
