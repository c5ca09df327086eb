"""L2/L3 documents: Markdown bullets with integer footnotes and a hidden entry id.

::

    ## <section>
    - <text> [^1][^2] <!--m_<id>-->

    ---

    [^1]: <trace id>
    [^2]: <trace id>

Labels are integers numbered by first appearance over the bullets, and one reference has one
label, so two bullets citing the same trace share it. The entry id lives in an HTML comment so it
survives editing and rendering. The legacy form (``- text [^m_<id>]`` with ``[^m_<id>]: a, b``)
is read and written back in the new form on the next save.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import unicodedata
from dataclasses import dataclass, field

from deeptutor_jupyter.errors import DeepTutorError

MAX_TEXT = 240
MAX_SECTION = 80

_SECTION_RE = re.compile(r"^##\s+(?P<name>.+?)\s*$")
_TITLE_RE = re.compile(r"^#\s+(?P<title>.+?)\s*$")
_FOOTNOTE_RE = re.compile(r"^\[\^(?P<label>[^\]\s]+)\]:\s*(?P<refs>.*?)\s*$")
_ID_COMMENT_RE = re.compile(r"<!--\s*m_(?P<id>[A-Za-z0-9_-]+)\s*-->")
_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
_FORBIDDEN = ("[^", "<!--", "-->", "\n", "\r")


class DocumentError(DeepTutorError, ValueError):
    code = "memory_document"

    """Text that is not a valid memory document; ``problems`` says where and why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass
class Entry:
    id: str
    text: str
    refs: list[str] = field(default_factory=list)


@dataclass
class Section:
    name: str
    entries: list[Entry] = field(default_factory=list)


@dataclass
class Document:
    sections: list[Section] = field(default_factory=list)
    title: str = ""

    def entries(self) -> list[tuple[Section, Entry]]:
        return [(section, entry) for section in self.sections for entry in section.entries]

    def find(self, entry_id: str) -> tuple[Section, Entry] | None:
        wanted = bare_id(entry_id)
        for section, entry in self.entries():
            if entry.id == wanted:
                return section, entry
        return None

    def section(self, name: str) -> Section | None:
        for section in self.sections:
            if section.name == name:
                return section
        return None

    def ensure_section(self, name: str) -> Section:
        section = self.section(name)
        if section is None:
            section = Section(name)
            self.sections.append(section)
        return section

    def refs(self) -> set[str]:
        return {ref for _, entry in self.entries() for ref in entry.refs}

    def is_empty(self) -> bool:
        return not any(section.entries for section in self.sections)


def bare_id(entry_id: str) -> str:
    """Ids are stored without the ``m_`` of the comment; accept both spellings from callers."""
    return entry_id[2:] if entry_id.startswith("m_") else entry_id


def new_entry_id() -> str:
    return secrets.token_hex(5)


def normalise(text: str) -> str:
    """What counts as "the same" entry: case, punctuation and spacing do not matter."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in folded)
    return " ".join(kept.split())


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be an entry's text, or None."""
    if not text.strip():
        return "text is empty"
    if len(text) > MAX_TEXT:
        return f"text is {len(text)} characters; at most {MAX_TEXT}"
    for bad in _FORBIDDEN:
        if bad in text:
            return f"text must be one line without {bad!r}"
    return None


def ref_problem(ref: str) -> str | None:
    if not _REF_RE.match(ref):
        return f"reference {ref!r} is not a trace id (letters, digits, _ . : -)"
    return None


def section_problem(name: str) -> str | None:
    if not name.strip() or len(name) > MAX_SECTION or "\n" in name or name != name.strip():
        return f"section name must be one trimmed line of 1-{MAX_SECTION} characters"
    return None


def parse(text: str, *, strict: bool = False) -> Document:
    """Read a document. Lenient by default; ``strict`` raises ``DocumentError`` for what a
    lenient read would have to guess (stray lines, unknown footnote labels, bad ids)."""
    problems: list[str] = []
    doc = Document()
    pending: list[tuple[int, Section, Entry, list[str]]] = []
    definitions: dict[str, list[str]] = {}
    current: Section | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line == "---":
            continue
        if (match := _FOOTNOTE_RE.match(line)) is not None:
            refs = [ref.strip() for ref in match["refs"].split(",") if ref.strip()]
            definitions[match["label"]] = refs
            problems += [f"line {number}: {p}" for p in filter(None, map(ref_problem, refs))]
        elif (match := _SECTION_RE.match(line)) is not None:
            current = doc.ensure_section(match["name"])
        elif (match := _TITLE_RE.match(line)) is not None and current is None and not doc.title:
            doc.title = match["title"]
        elif (bullet := _split_bullet(line)) is not None:
            if current is None:
                problems.append(f"line {number}: a bullet before the first '## section'")
                current = doc.ensure_section("Notes")
            text, labels, entry_id = bullet
            entry = Entry(id=entry_id, text=text)
            current.entries.append(entry)
            pending.append((number, current, entry, labels))
        else:
            problems.append(f"line {number}: not a section, bullet or footnote: {line[:60]!r}")
            current = current or doc.ensure_section("Notes")
            entry = Entry(id="", text=line)
            current.entries.append(entry)
            pending.append((number, current, entry, []))
    _resolve(pending, definitions, problems)
    if strict and problems:
        raise DocumentError(problems)
    return doc


def _split_bullet(line: str) -> tuple[str, list[str], str] | None:
    """``- text [^1][^2] <!--m_id-->`` as (text, labels, id), peeled from the end.

    Hand-written rather than one regex: a lazy text group followed by optional marks backtracks
    on every character, which made a 10,000-entry document take several times longer to read.
    """
    if len(line) < 3 or line[0] not in "-*" or not line[1].isspace():
        return None
    rest, entry_id, labels = line[2:].strip(), "", []
    start = rest.rfind("<!--") if rest.endswith("-->") else -1
    if start >= 0 and (match := _ID_COMMENT_RE.fullmatch(rest[start:])) is not None:
        entry_id, rest = match["id"], rest[:start].rstrip()
    while rest.endswith("]") and (start := rest.rfind("[^")) >= 0:
        label = rest[start + 2 : -1]
        if not label or any(ch.isspace() or ch == "]" for ch in label):
            break
        labels.append(label)
        rest = rest[:start].rstrip()
    labels.reverse()
    return (rest, labels, entry_id) if rest else None


def _resolve(
    pending: list[tuple[int, Section, Entry, list[str]]],
    definitions: dict[str, list[str]],
    problems: list[str],
) -> None:
    used: set[str] = set()
    for number, section, entry, labels in pending:
        for label in labels:
            if label not in definitions:
                problems.append(f"line {number}: footnote [^{label}] has no definition")
                continue
            for ref in definitions[label]:
                if ref not in entry.refs:
                    entry.refs.append(ref)
            # Legacy bullets carried their id as the footnote label.
            if not entry.id and label.startswith("m_") and _ID_RE.match(label[2:]):
                entry.id = label[2:]
        if problem := text_problem(entry.text):
            problems.append(f"line {number}: {problem}")
        if not entry.id:
            # Derived, not random, so re-reading a hand-added bullet gives it the same id.
            seed = f"{section.name}\n{entry.text}".encode()
            entry.id = "h" + hashlib.sha1(seed).hexdigest()[:9]
        while entry.id in used:
            problems.append(f"line {number}: entry id m_{entry.id} is used twice")
            entry.id = new_entry_id()
        used.add(entry.id)


def render(doc: Document) -> str:
    """The canonical text: labels renumbered by first appearance, one label per reference."""
    labels: dict[str, int] = {}
    out: list[str] = []
    if doc.title:
        out += [f"# {doc.title}", ""]
    for section in doc.sections:
        out.append(f"## {section.name}")
        for entry in section.entries:
            marks = "".join(f"[^{labels.setdefault(ref, len(labels) + 1)}]" for ref in entry.refs)
            out.append(f"- {entry.text}{' ' + marks if marks else ''} <!--m_{entry.id}-->")
        out.append("")
    if labels:
        out += ["---", ""]
        out += [f"[^{label}]: {ref}" for ref, label in labels.items()]
        out.append("")
    return "\n".join(out)


def line_view(doc: Document | list[tuple[Section, Entry]]) -> str:
    """Entries as numbered lines without footnotes, the view a consolidation prompt edits."""
    pairs = doc.entries() if isinstance(doc, Document) else doc
    lines = []
    for number, (section, entry) in enumerate(pairs, start=1):
        refs = ", ".join(entry.refs) or "none"
        lines.append(f"{number}. [m_{entry.id}] ({section.name}) {entry.text}  refs: {refs}")
    return "\n".join(lines) or "(the document is empty)"
