"""The strings a learner reads on an ``ask_user`` card, in English and Chinese."""

from __future__ import annotations

_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "submit": "Submit",
        "cancel": "Cancel",
        "recommended": "★ recommended",
        "other": "Other",
        "other_placeholder": "anything the options do not cover",
        "text_placeholder": "type your answer",
        "number_placeholder": "number",
        "date": "Date",
        "directory_placeholder": "folder, e.g. data/",
        "directory_hint": "A folder path relative to the notebook.",
        "workspace": "Notebook folder: {path}",
        "expires": "Answer before {time}.",
        "need_choice": "Pick an option to submit.",
        "need_choice_or_other": "Pick an option, or fill in “Other”, to submit.",
        "need_one": "Pick at least one option to submit.",
        "need_text": "Type an answer to submit.",
        "need_date": "Pick a date to submit.",
        "sending": "Sending…",
        "chosen": "Chosen:",
        "nothing_chosen": "No option chosen.",
        "other_answer": "Other:",
        "your_answer": "Your answer:",
        "answered_at": "Answered at {time}",
        "cancelled_at": "Cancelled at {time}",
        "continuing": "continuing…",
        "continues_in": "continues in {where}",
        "answered": "answered",
        "cancelled": "Cancelled",
        "expired": "Timed out: this question was not answered in time.",
        "not_resumable": (
            "The kernel restarted; this question can no longer continue. Start the task again."
        ),
        "callback_failed": "Could not send the answer: {reason}",
    },
    "zh": {
        "submit": "提交",
        "cancel": "取消",
        "recommended": "★ 推荐",
        "other": "其他说明",
        "other_placeholder": "选项没有覆盖到的内容",
        "text_placeholder": "输入你的回答",
        "number_placeholder": "数字",
        "date": "日期",
        "directory_placeholder": "文件夹，例如 data/",
        "directory_hint": "相对于笔记本所在位置的文件夹路径。",
        "workspace": "笔记本所在文件夹：{path}",
        "expires": "请在 {time} 之前回答。",
        "need_choice": "请选择一个选项后提交。",
        "need_choice_or_other": "请选择一个选项或填写“其他说明”后提交。",
        "need_one": "请至少选择一项后提交。",
        "need_text": "请输入回答后提交。",
        "need_date": "请选择日期后提交。",
        "sending": "正在提交…",
        "chosen": "已选择：",
        "nothing_chosen": "未选择任何选项。",
        "other_answer": "其他说明：",
        "your_answer": "你的回答：",
        "answered_at": "回答于 {time}",
        "cancelled_at": "取消于 {time}",
        "continuing": "继续执行中…",
        "continues_in": "将在 {where} 中继续",
        "answered": "已回答",
        "cancelled": "已取消",
        "expired": "已超时：这个问题没有在规定时间内得到回答。",
        "not_resumable": "内核已重启，这个问题无法继续。请重新发起任务。",
        "callback_failed": "回答发送失败：{reason}",
    },
}


def s(key: str, language: str = "en") -> str:
    table = _STRINGS.get(language, _STRINGS["en"])
    return table.get(key) or _STRINGS["en"].get(key, key)
