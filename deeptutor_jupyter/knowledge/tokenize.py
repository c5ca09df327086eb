"""Turning text into BM25 terms: lower-case words, and CJK characters one by one.

Chinese and Japanese are written without spaces, and a word segmenter would be a heavy
dependency; single characters are the usual cheap baseline and make a query such as 循环 match
both 循 and 环 in the notes. Underscores split identifiers, so ``read_csv`` is found by "read
csv". NFKC folds full-width letters and digits, which Chinese input methods often produce.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from array import array

__all__ = ["TOKENIZER_VERSION", "Vocabulary", "append_token_ids", "token_ids", "tokenize"]

# Bumped whenever the terms change: an index built with other terms must be rebuilt.
TOKENIZER_VERSION = 1

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # compatibility ideographs
)


@functools.cache
def _token() -> re.Pattern[str]:
    """Compiled at the first non-ASCII text (~1.8 ms, its large character classes): every
    kernel's first request imports this module (issue 28), few ever tokenize such text."""
    return re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


# A light list: only words that carry no meaning in a tutoring query. "not", "no" and the
# question words stay, because "why" and "not" change what a learner is asking.
_STOPWORDS_TEXT = """a an and are as at be been but by for from has have in into is it its of
on or so than that the their then there these this those to was were will with"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


# For ASCII text the pattern above is "runs of [a-z0-9] after lower()": one translate turns
# capitals into small letters and every other non-alphanumeric character into a space, and
# str.split does the rest; about twice as fast as the regex, and a fifth faster than lower()
# followed by a translate.
_ASCII_SPLIT = str.maketrans(
    {chr(c): chr(c).lower() if chr(c).isalnum() else " " for c in range(128)}
)


def _words(text: str) -> list[str]:
    if text.isascii():  # NFKC leaves ASCII unchanged, and most course material is ASCII
        return text.translate(_ASCII_SPLIT).split()
    return _token().findall(unicodedata.normalize("NFKC", text).lower())


def tokenize(text: str) -> list[str]:
    """The BM25 terms of ``text``, in order, stopwords removed."""
    return [t for t in _words(text) if t not in STOPWORDS]


class Vocabulary(dict[str, int]):
    """Term -> id, handing out the next id to a term it has not seen.

    Stopwords take the first ids, so ``token_ids`` can map every word at C speed
    (``map(vocab.__getitem__, words)``) and drop stopwords afterwards as ``id < n_stop``.
    """

    def __init__(self, terms: dict[str, int] | list[str] | None = None) -> None:
        # A list is the index's vocab.json: the terms in id order.
        if isinstance(terms, list):
            super().__init__(zip(terms, range(len(terms)), strict=True))
        else:
            super().__init__(terms or {})
        for word in sorted(STOPWORDS):
            if word not in self:
                self[word] = len(self)
        self.n_stop = len(STOPWORDS)
        if any(self[w] >= self.n_stop for w in STOPWORDS):
            raise ValueError("a vocabulary must begin with the stopwords")

    def copy(self) -> Vocabulary:
        """An independent copy (a dict copy: much faster than building one from the terms)."""
        out = Vocabulary.__new__(Vocabulary)
        dict.update(out, self)
        out.n_stop = self.n_stop
        return out

    def __missing__(self, term: str) -> int:
        self[term] = index = len(self)
        return index

    def terms(self) -> list[str]:
        """The terms in id order (what vocab.json holds)."""
        # Ids are handed out in insertion order, so the keys are already in id order.
        terms = list(self)
        if terms and self[terms[-1]] != len(terms) - 1:
            raise ValueError("a vocabulary's ids must follow its insertion order")
        return terms


def token_ids(text: str, vocab: Vocabulary) -> list[int]:
    """The term ids of ``text`` in ``vocab``, stopwords included (ids below ``vocab.n_stop``)."""
    return list(map(vocab.__getitem__, _words(text)))


# Words looked up at a time: a MiB of text is ~170,000 words, ~8 MB of str objects, looked
# up again after all were made; a few thousand at a time are still in cache (tokenising was
# 12% faster here, the same ids).
_LOOKUP_BLOCK = 2048


def append_token_ids(ids: array[int], texts: list[str], vocab: Vocabulary) -> list[int]:
    """``token_ids`` of each text appended to ``ids`` (int32); the number of each text's ids.

    Indexing converts ~10^7 ids: numpy pulls them from the map straight into int32, about a
    third faster than extending the array with lists.
    """
    import numpy as np

    def append(words: list[str]) -> None:
        ids.frombytes(np.fromiter(map(vocab.__getitem__, words), np.int32, len(words)).tobytes())

    words: list[str] = []
    counts = []
    for text in texts:
        these = _words(text)
        words += these
        counts.append(len(these))
        if len(words) >= _LOOKUP_BLOCK:
            append(words)
            words = []
    append(words)
    return counts
