"""The strings of the forget card, in English and Chinese (joined into kernel/i18n.py)."""

from __future__ import annotations

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Forget everything the tutor remembers",
        "what": (
            "This deletes {turns} remembered turns in {files} trace files and {documents} "
            "documents (the tutor's notes and what it knows about you, your preferences "
            "included), the consolidation state and the deletion log. It cannot be undone."
        ),
        "notebooks": (
            "Saved notebooks keep their trace bundles; remove them with "
            "deeptutor-jupyter scrub NOTEBOOK."
        ),
        "confirm": "I understand this deletes all my tutor memory",
        "delete": "Delete everything",
        "cancel": "Cancel",
        "deleted": "Deleted {files} trace files and {documents} documents at {time}.",
        "cancelled": "Cancelled: nothing was deleted.",
        "failed": "Could not delete everything: {reason}",
        "open": "Waiting for confirmation; nothing has been deleted.",
    },
    "zh": {
        "title": "清除导师记住的一切",
        "what": (
            "将删除 {files} 个记录文件中的 {turns} 轮对话记录、{documents} 个文档"
            "（导师的笔记和它对你的了解，包括你的偏好设置）、整理状态和删除日志。此操作无法撤销。"
        ),
        "notebooks": "已保存的笔记本仍保留其中的记录；可用 deeptutor-jupyter scrub NOTEBOOK 删除。",
        "confirm": "我明白这会删除导师关于我的全部记忆",
        "delete": "全部删除",
        "cancel": "取消",
        "deleted": "已于 {time} 删除 {files} 个记录文件和 {documents} 个文档。",
        "cancelled": "已取消：没有删除任何内容。",
        "failed": "未能全部删除：{reason}",
        "open": "等待确认；尚未删除任何内容。",
    },
}
