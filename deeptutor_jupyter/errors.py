"""The root of every error deeptutor-jupyter raises on purpose.

Catch ``DeepTutorError`` to handle any of them; tell them apart by type, or by ``code`` where a
caller only has the instance to go on (a surface that renders it, a server that maps it to an HTTP
status). Each subclass keeps the builtin base it always had (``ValueError``...), so existing
``except ValueError`` code keeps working. The message is worded for the learner.
"""

from __future__ import annotations


class DeepTutorError(Exception):
    code: str = "error"
