"""What the memory workbench says, in English and Chinese."""

from __future__ import annotations

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Tutor memory",
        "fallback": (
            "The memory workbench: run `%tutor memory` with a running kernel to read and edit "
            "what the tutor remembers."
        ),
        "document": "Document",
        "entries": "{name} · {count}",
        "entry": "entry",
        "entries_word": "entries",
        "op": "op",
        "ops": "ops",
        "trace": "trace",
        "traces": "traces",
        "empty": "_Nothing is remembered here yet._",
        "no_refs": "no trace cited",
        "from_trace": "from trace {id} on {date}: {question}",
        "from_unknown": "from trace {id}",
        "more_rows": "Showing the first {shown} of {total} entries; use Raw for the rest.",
        "edit": "Edit",
        "save": "Save",
        "cancel": "Cancel",
        "delete": "Delete",
        "reason": "reason…",
        "reason_contradicted": "contradicted",
        "reason_superseded": "superseded",
        "reason_stale": "stale",
        "reason_low-signal": "low-signal",
        "not_saved": "Not saved: {reason}",
        "edit_in_raw": "this entry cites no trace, and an edit must keep one; change it in Raw.",
        "not_deleted": "Not deleted: {reason}",
        "saved": "Saved {name}.",
        "deleted": "Deleted m_{id} ({reason}) from {name}.",
        "raw": "Raw",
        "raw_invalid": "Not saved; the document does not parse:",
        "mode": "Mode",
        "mode_update": "update: learn from new traces",
        "mode_audit": "audit: check lines against their traces",
        "mode_dedup": "dedup: merge lines that say the same",
        "mode_merge": "merge: join identical lines (no model)",
        "preview": "Preview",
        "apply": "Apply",
        "running": "running…",
        "busy": "Another consolidation of this document is running.",
        "no_model": (
            "No model is configured, and mode “{mode}” needs one. Run %tutor once to set one "
            "up; merge works without a model."
        ),
        "model_failed": "Could not create the model: {reason}",
        "no_loop": "Consolidation needs a running event loop (a Jupyter kernel).",
        "failed": "Consolidation failed: {reason}",
        "preferences_off": (
            "Consolidation is off for this document: preferences are never auto-consolidated."
        ),
        "proposed": "{ops} proposed, {rejected} rejected, {traces} read.",
        "no_change": "No changes proposed.",
        "rejected": "Rejected:",
        "stale_preview": "The document changed since the preview; run Preview again.",
        "applied": "Applied {ops} to {name}.",
        "apply_rejected": "Rejected while applying:",
        "auto_title": "Background consolidation",
        "auto_toggle": "Update L2 and L3/profile after every {every} new traces",
        "auto_off": (
            "Off: L2 and L3/profile change only when you consolidate here. "
            "Tick the box to keep them current after your turns."
        ),
        "auto_never": (
            "On: after every {every} new traces the tutor updates L2 and L3/profile with "
            "{model}, in the background. It has not run yet."
        ),
        "auto_last": "Last ran {when} with {model}: {what}.",
        "auto_no_model": (
            "Last tried {when}: {reason}. Nothing was lost; the traces wait for the next run."
        ),
        "auto_doc_done": "{doc} read {traces}, {ops} applied",
        "auto_doc_failed": "{doc} failed ({reason}); its traces stay unread and are retried",
        "auto_doc_busy": "{doc} was being consolidated by another kernel",
        "auto_saved_on": "Saved in settings.toml: background consolidation is on.",
        "auto_saved_off": "Saved in settings.toml: background consolidation is off.",
        "auto_overridden": "Saved in settings.toml, but {source} overrides it.",
        "auto_not_saved": "Not saved: {reason}",
        "fallback_auto": "Background consolidation: {state}.",
        "fallback_on": "on",
        "fallback_off": "off",
    },
    "zh": {
        "title": "导师记忆",
        "fallback": (
            "记忆工作台：在运行中的内核里执行 `%tutor memory` 即可查看和编辑导师记住的内容。"
        ),
        "document": "文档",
        "entries": "{name} · {count}",
        "entry": "条",
        "entries_word": "条",
        "op": "项操作",
        "ops": "项操作",
        "trace": "条记录",
        "traces": "条记录",
        "empty": "_这里还没有记住任何内容。_",
        "no_refs": "未引用任何记录",
        "from_trace": "来自记录 {id}（{date}）：{question}",
        "from_unknown": "来自记录 {id}",
        "more_rows": "仅显示前 {shown} 条（共 {total} 条）；其余请在“原文”中查看。",
        "edit": "编辑",
        "save": "保存",
        "cancel": "取消",
        "delete": "删除",
        "reason": "原因…",
        "reason_contradicted": "与事实矛盾",
        "reason_superseded": "已被取代",
        "reason_stale": "已过时",
        "reason_low-signal": "价值不大",
        "not_saved": "未保存：{reason}",
        "edit_in_raw": "该条目没有引用任何记录，而编辑必须保留引用；请在“原文”中修改。",
        "not_deleted": "未删除：{reason}",
        "saved": "已保存 {name}。",
        "deleted": "已从 {name} 删除 m_{id}（{reason}）。",
        "raw": "原文",
        "raw_invalid": "未保存；文档无法解析：",
        "mode": "模式",
        "mode_update": "更新：从新记录中学习",
        "mode_audit": "核查：对照记录检查条目",
        "mode_dedup": "去重：合并意思相同的条目",
        "mode_merge": "合并：合并完全相同的条目（无需模型）",
        "preview": "预览",
        "apply": "应用",
        "running": "运行中…",
        "busy": "这个文档的另一次整理正在进行。",
        "no_model": (
            "尚未配置模型，而模式“{mode}”需要模型。请先运行一次 %tutor 进行设置；合并模式无需模型。"
        ),
        "model_failed": "无法创建模型：{reason}",
        "no_loop": "整理需要一个正在运行的事件循环（Jupyter 内核）。",
        "failed": "整理失败：{reason}",
        "preferences_off": "此文档不参与整理：偏好设置从不自动整理。",
        "proposed": "建议 {ops}，拒绝 {rejected} 项，读取 {traces}。",
        "no_change": "没有建议的改动。",
        "rejected": "被拒绝的操作：",
        "stale_preview": "预览之后文档已被修改；请重新预览。",
        "applied": "已对 {name} 应用 {ops}。",
        "apply_rejected": "应用时被拒绝：",
        "auto_title": "后台整理",
        "auto_toggle": "每积累 {every} 条新记录，自动更新 L2 和 L3/profile",
        "auto_off": (
            "已关闭：L2 和 L3/profile 只在你于此处整理时改变。勾选后将在对话之后自动保持更新。"
        ),
        "auto_never": (
            "已开启：每积累 {every} 条新记录，导师会在后台用 {model} 更新 L2 和 L3/profile。"
            "尚未运行过。"
        ),
        "auto_last": "上次运行：{when}，模型 {model}：{what}。",
        "auto_no_model": (
            "上次尝试：{when}：{reason}。没有丢失任何内容；这些记录会在下次运行时处理。"
        ),
        "auto_doc_done": "{doc} 读取 {traces}，应用 {ops}",
        "auto_doc_failed": "{doc} 失败（{reason}）；其记录保持未读，稍后重试",
        "auto_doc_busy": "{doc} 正由另一个内核整理",
        "auto_saved_on": "已保存到 settings.toml：后台整理已开启。",
        "auto_saved_off": "已保存到 settings.toml：后台整理已关闭。",
        "auto_overridden": "已保存到 settings.toml，但 {source} 的设置优先。",
        "auto_not_saved": "未保存：{reason}",
        "fallback_auto": "后台整理：{state}。",
        "fallback_on": "开启",
        "fallback_off": "关闭",
    },
}
