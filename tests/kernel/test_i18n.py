"""One translation table: every view's strings in it, the same keys in each language, and a
key missing in a language falls back to English key by key."""

from __future__ import annotations

import pytest

from deeptutor_jupyter.kernel import i18n
from deeptutor_jupyter.kernel.i18n import Texts, t


def test_english_and_chinese_have_the_same_keys() -> None:
    table = i18n._table()
    assert set(table["en"]) == set(table["zh"])
    prefixes = {key.split(".", 1)[0] for key in table["en"] if "." in key}
    assert prefixes == {"ask", "memory", "setup", "forget", "quiz"}


def test_a_missing_key_falls_back_to_english_key_by_key(monkeypatch: pytest.MonkeyPatch) -> None:
    table = i18n._table()
    monkeypatch.delitem(table["zh"], "ask.submit")
    assert t("ask.submit", "zh") == "Submit"
    assert t("ask.cancel", "zh") == "取消"  # the rest of the language stays
    assert Texts("ask", "zh")["submit"] == "Submit"
    assert t("stop", "fr") == "Stop"  # an unknown language reads English
    assert t("no.such.key") == "no.such.key"
    assert "title" in Texts("setup", "en") and len(Texts("forget", "en")) > 3
