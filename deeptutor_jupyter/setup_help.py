"""What a learner without a model reads: exact steps for each way to connect one."""

from __future__ import annotations

from pathlib import Path

from deeptutor_jupyter.providers.specs import find_provider


def _spec_model(name: str, fallback: str) -> str:
    spec = find_provider(name)
    return spec.default_model if spec and spec.default_model else fallback


_SETUP_EN = """\
**Connect DeepTutor to a model** — pick one. A key is read from the environment or from
`{path}` (mode 0600); never paste a key into a notebook cell.

- **OpenAI**: set `OPENAI_API_KEY` before starting Jupyter, or put
  `provider = "openai"`, `model = "{openai}"`, `api_key = "..."` in `{path}`.
- **DeepSeek**: set `DEEPSEEK_API_KEY`, or `provider = "deepseek"`, `model = "{deepseek}"`,
  `api_key = "..."` in `{path}`.
- **Anthropic**: set `ANTHROPIC_API_KEY`, or `provider = "anthropic"`, `model = "{anthropic}"`,
  `api_key = "..."` in `{path}`.
- **Ollama on this machine** (no key): run `ollama serve` and `ollama pull {ollama}`, then set
  `provider = "ollama"`, `model = "{ollama}"` (base URL `http://localhost:11434/v1`).
- **Any OpenAI-compatible URL**: `provider = "custom"`, `base_url = "http://host:port/v1"`,
  `model = "..."`, and `api_key = "..."` if the server wants one (or set `DEEPTUTOR_BASE_URL`,
  `DEEPTUTOR_MODEL`, `DEEPTUTOR_API_KEY`).

The same settings work as environment variables (`DEEPTUTOR_PROVIDER`, `DEEPTUTOR_MODEL`,
`DEEPTUTOR_BASE_URL`, `DEEPTUTOR_API_KEY`), in `ipython_config.py`
(`c.TutorMagics.provider = "deepseek"`, `c.TutorMagics.model = "{deepseek}"`), or for one cell
(`%tutor --provider ollama --model {ollama} ...`). `%tutor config` shows what is in effect and
where each value came from.
"""

_SETUP_ZH = """\
**为 DeepTutor 连接一个模型** —— 任选一种。密钥从环境变量或 `{path}`（权限 0600）读取；
请勿把密钥粘贴到笔记本单元格中。

- **OpenAI**：启动 Jupyter 前设置 `OPENAI_API_KEY`，或在 `{path}` 中写入
  `provider = "openai"`、`model = "{openai}"`、`api_key = "..."`。
- **DeepSeek**：设置 `DEEPSEEK_API_KEY`，或在 `{path}` 中写入 `provider = "deepseek"`、
  `model = "{deepseek}"`、`api_key = "..."`。
- **Anthropic**：设置 `ANTHROPIC_API_KEY`，或在 `{path}` 中写入 `provider = "anthropic"`、
  `model = "{anthropic}"`、`api_key = "..."`。
- **本机 Ollama**（无需密钥）：运行 `ollama serve` 和 `ollama pull {ollama}`，然后设置
  `provider = "ollama"`、`model = "{ollama}"`（地址 `http://localhost:11434/v1`）。
- **任意 OpenAI 兼容地址**：`provider = "custom"`、`base_url = "http://host:port/v1"`、
  `model = "..."`，服务需要时再加 `api_key = "..."`（也可设置 `DEEPTUTOR_BASE_URL`、
  `DEEPTUTOR_MODEL`、`DEEPTUTOR_API_KEY`）。

这些设置也可以写成环境变量（`DEEPTUTOR_PROVIDER`、`DEEPTUTOR_MODEL`、`DEEPTUTOR_BASE_URL`、
`DEEPTUTOR_API_KEY`），写进 `ipython_config.py`（`c.TutorMagics.provider = "deepseek"`、
`c.TutorMagics.model = "{deepseek}"`），或只对一个单元格生效（`%tutor --provider ollama
--model {ollama} ...`）。`%tutor config` 会显示当前生效的设置及每一项的来源。
"""


def instructions(language: str, path: Path) -> str:
    template = _SETUP_ZH if language == "zh" else _SETUP_EN
    return template.format(
        path=path,
        openai=_spec_model("openai", "gpt-4o-mini"),
        deepseek=_spec_model("deepseek", "deepseek-chat"),
        anthropic=_spec_model("anthropic", "claude-sonnet-4-5"),
        ollama=_spec_model("ollama", "llama3.1"),
    )
