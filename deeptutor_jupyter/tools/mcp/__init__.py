"""MCP servers as deferred tools (docs/mcp.md): ``[mcp_servers.<name>]`` in settings.toml, each
server's tools listed as ``mcp__<server>__<tool>`` and loaded on demand.

Nothing here imports the ``mcp`` SDK at import time: ``%load_ext`` stays light, and a kernel
without configured servers never loads it.
"""

from __future__ import annotations

from deeptutor_jupyter.tools.mcp.config import McpServerConfig, read_servers
from deeptutor_jupyter.tools.mcp.servers import McpServers

__all__ = ["McpServerConfig", "McpServers", "read_servers"]
