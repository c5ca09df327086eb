"""The answer rules: what an answer to an ``ask_user`` question may be, in one place.

The coordinator refuses what breaks them (``check_types``, ``check_answer``), the cell's card
gates Submit with the same number rule (``is_number``), and the panel compiles the same patterns:
``NUMBER_PATTERN`` and ``ISO_DATE_PATTERN`` are written into labextension/src/contracts.ts by
scripts/schema_ts.py. tests/contracts/answer_cases.json is one list of answers that pytest (this
module and the card) and vitest (the panel) all check, so no copy can drift alone.
"""

from __future__ import annotations

import contextlib
import math
import re
from datetime import date
from pathlib import Path
from typing import Any

from deeptutor_jupyter import limits
from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.interaction.schema import CHOICE_MODES

# What a number answer may look like: an optional sign, digits with an optional decimal point
# (or a leading one), an optional exponent. Not Python's float syntax (no "1_000", "inf") nor
# JavaScript's Number() (no "0x10", ""), and no spaces around it (forms strip them first).
# Written so that Python's ``re`` and JavaScript's ``RegExp`` read it the same way.
NUMBER_PATTERN = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
ISO_DATE_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_NUMBER = re.compile(NUMBER_PATTERN)
_ISO_DATE = re.compile(ISO_DATE_PATTERN)


class InteractionError(DeepTutorError):
    """A submission that was refused; ``code`` names the case for code, the text for people."""

    code = "error"


class InvalidAnswer(InteractionError):
    code = "invalid"


def is_number(text: str) -> bool:
    """A finite number written plainly (``42``, ``-1.5``, ``2e3``); nothing around it."""
    return bool(_NUMBER.fullmatch(text)) and math.isfinite(float(text))


def is_iso_date(text: str) -> bool:
    """A real calendar day as ``YYYY-MM-DD`` (not a week date, not ``20260102``)."""
    if not _ISO_DATE.fullmatch(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def check_types(selections: Any, custom_input: Any, cancelled: Any) -> None:
    """InvalidAnswer for values no form could send (a number for the text, a string of ids)."""
    if selections is not None and (
        not isinstance(selections, (list, tuple)) or not all(isinstance(s, str) for s in selections)
    ):
        raise InvalidAnswer("selections must be a list of option ids (strings).")
    if not isinstance(custom_input, str):
        raise InvalidAnswer(
            f"custom_input must be a string, not {type(custom_input).__name__}; "
            f"send the answer as text, e.g. {str(custom_input)[:20]!r}."
        )
    if not isinstance(cancelled, bool):
        raise InvalidAnswer("cancelled must be True or False.")
    # Refused before anything is stored: a 30 MB answer grew state.db by ~220 MB.
    if len(custom_input) > limits.ANSWER_CHARS:
        raise InvalidAnswer(limits.too_long("The answer", len(custom_input), limits.ANSWER_CHARS))
    if selections is not None and len(selections) > limits.ANSWER_SELECTIONS:
        raise InvalidAnswer(
            limits.too_long("The answer", len(selections), limits.ANSWER_SELECTIONS, "selections")
        )


def check_answer(
    body: dict[str, Any], selections: list[str], custom_input: str, workspace: Path
) -> None:
    """Raise InvalidAnswer when an answer does not fit the question it answers."""
    mode = body.get("mode")
    ids = [o["id"] for o in body.get("options", [])]
    unknown = [s for s in selections if s not in ids]
    if unknown:
        raise InvalidAnswer(f"Not an option of this question: {', '.join(map(repr, unknown))}.")
    if len(set(selections)) != len(selections):
        raise InvalidAnswer("An option was selected twice.")
    if mode in CHOICE_MODES:
        if custom_input and not body.get("allow_custom"):
            raise InvalidAnswer("This question does not take a free-text answer.")
        if mode == "single" and len(selections) > 1:
            raise InvalidAnswer("Choose one option.")
        if mode in ("single", "toggle") and not selections and not custom_input:
            raise InvalidAnswer("Choose at least one option.")
        return
    if selections:
        raise InvalidAnswer(f"A {mode} question has no options to select.")
    text = custom_input.strip()
    if not text:
        raise InvalidAnswer("Please type an answer.")
    if mode in ("number", "date") and text != custom_input:
        raise InvalidAnswer(f"{custom_input!r} has spaces around it; send {text!r}.")
    if mode == "number" and not is_number(text):
        with contextlib.suppress(ValueError):
            if not math.isfinite(float(text)):
                raise InvalidAnswer(f"{text!r} is not a finite number.")
        raise InvalidAnswer(f"{text!r} is not a number (write it like 42, -1.5 or 2e3).")
    if mode == "date" and not is_iso_date(text):
        raise InvalidAnswer(f"{text!r} is not a date in ISO form (YYYY-MM-DD).")
    if mode == "directory":
        root = workspace.resolve()
        if not (root / text).resolve().is_relative_to(root):
            raise InvalidAnswer(f"{text!r} is outside the notebook's folder ({root}).")
