"""Turning text into BM25 terms: lower-case words, and CJK characters one by one.

Chinese and Japanese are written without spaces, and a word segmenter would be a heavy
dependency; single characters are the usual cheap baseline and make a query such as 循环 match
both 循 and 环 in the notes. Underscores split identifiers, so ``read_csv`` is found by "read
csv". NFKC folds full-width letters and digits, which Chinese input methods often produce.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["TOKENIZER_VERSION", "tokenize"]

# Bumped whenever the terms change: an index built with other terms must be rebuilt.
TOKENIZER_VERSION = 1

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # compatibility ideographs
)
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")

# A light list: only words that carry no meaning in a tutoring query. "not", "no" and the
# question words stay, because "why" and "not" change what a learner is asking.
_STOPWORDS_TEXT = """a an and are as at be been but by for from has have in into is it its of
on or so than that the their then there these this those to was were will with"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def tokenize(text: str) -> list[str]:
    """The BM25 terms of ``text``, in order, stopwords removed."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return [t for t in _TOKEN.findall(folded) if t not in STOPWORDS]
