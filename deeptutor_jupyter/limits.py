"""The size limits on what a learner, a model or a browser hands the tutor, in one place.

Each limit is refused in words that say it (docs/configuration.md#limits): a bad input gets a
clear error and nothing is stored, so a 30 MB answer or a 20 MB question cannot grow
``state.db`` or freeze a kernel. Kept free of imports: the server, the kernel and the schema
modules all read it.
"""

from __future__ import annotations

QUESTION_CHARS = 20_000  # a learner's question (%tutor, the panel, the terminal, the hosts)
ANSWER_CHARS = 20_000  # a free-text answer to ask_user, or a short quiz answer
CODE_ANSWER_CHARS = 100_000  # a code answer to a quiz
ANSWER_SELECTIONS = 100  # option ids in one answer

# What the model may put in an ask_user form (interaction/schema.py).
ASK_TITLE_CHARS = 500
ASK_DESCRIPTION_CHARS = 4_000
ASK_OPTIONS = 50
ASK_OPTION_ID_CHARS = 100
ASK_OPTION_LABEL_CHARS = 500
ASK_OPTION_DESCRIPTION_CHARS = 2_000
ASK_SUBMIT_LABEL_CHARS = 100

# A TUTOR.md is read this far (O_NOFOLLOW, a regular file only): its front matter and the
# instructions kept for the prompt (6,000 characters of a folder's, 20,000 of a course pack's)
# are in it. A 1 GiB TUTOR.md was read whole on every turn.
TUTOR_MD_BYTES = 64 * 1024

# A JSON body of the server extension's REST API (server/handlers.py ``read_json``).
JSON_BODY_BYTES = 1024 * 1024
JSON_DEPTH = 32


def too_long(what: str, size: int, limit: int, unit: str = "characters") -> str:
    """The refusal of anything over a limit: what it was, how big, and the limit."""
    return f"{what} is {size:,} {unit}; the limit is {limit:,} {unit}."
