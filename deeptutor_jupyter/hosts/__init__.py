"""The tutor hosted by other applications: an MCP server (``deeptutor-jupyter mcp``) and an ACP
agent (``deeptutor-jupyter acp``).

A host drives one ``TutorSession`` like every surface (never a loop of its own) and renders what
its protocol can show: an answer, or a question waiting for the learner.
"""
