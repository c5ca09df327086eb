"""The Tutor panel's translations, the JupyterLab way.

The source of each language is a gettext .po file, deeptutor_jupyter/locale/<lang>/LC_MESSAGES/
deeptutor_jupyter.po; this script writes the Jed JSON beside it that JupyterLab serves (the
package's `jupyterlab.locale` entry point, jupyterlab_server.translation_utils). The msgids are
the English texts of every `__('...')` call in labextension/src and the titles and descriptions of
labextension/schema/plugin.json.

    python scripts/i18n_catalog.py            # write the .json of each .po
    python scripts/i18n_catalog.py --add      # add the missing msgids to each .po (msgstr "")
    python scripts/i18n_catalog.py --check    # fail on a missing or empty translation, an
                                              # obsolete entry, a stale .json, or a `__` call
                                              # whose text is not one string literal
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOMAIN = "deeptutor_jupyter"
# A `__(` call with no literal is allowed only under a comment saying where its texts come from.
DYNAMIC_MARK = "i18n-dynamic"
CALL = re.compile(r"(?<![\w.$])__\(")


@dataclass(frozen=True)
class Msg:
    text: str
    where: str


def _js_string(source: str, start: int) -> tuple[str, int]:
    """The value of the JS string literal at ``start`` and the index after it."""
    quote = source[start]
    out: list[str] = []
    i = start + 1
    simple = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "f": "\f", "v": "\v"}
    while i < len(source):
        c = source[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\n":
            break
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = source[i + 1]
        if e == "u" and source[i + 2] == "{":
            end = source.index("}", i)
            out.append(chr(int(source[i + 3 : end], 16)))
            i = end + 1
        elif e == "u":
            out.append(chr(int(source[i + 2 : i + 6], 16)))
            i += 6
        elif e == "x":
            out.append(chr(int(source[i + 2 : i + 4], 16)))
            i += 4
        else:
            out.append(simple.get(e, e))
            i += 2
    raise ValueError("unterminated string literal")


def source_messages(src: Path) -> tuple[list[Msg], list[str]]:
    """The msgids of the `__` calls in src, and the calls whose text is not one literal."""
    found: list[Msg] = []
    problems: list[str] = []
    for path in sorted([*src.glob("*.ts"), *src.glob("*.tsx")]):
        if path.name.endswith(".test.ts") or path.name == "i18n.ts":
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for match in CALL.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.name}:{line}"
            i = match.end()
            while text[i].isspace():
                i += 1
            if text[i] in "'\"":
                value, after = _js_string(text, i)
                while text[after].isspace():
                    after += 1
                if text[after] in ",)":
                    found.append(Msg(value, where))
                    continue
            if line >= 2 and DYNAMIC_MARK in lines[line - 2]:
                continue
            problems.append(f"{where}: __() needs its text as one string literal")
    return found, problems


def schema_messages(schema_path: Path) -> list[Msg]:
    """The titles and descriptions of the plugin's settings (and of their choices)."""
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    found: list[Msg] = []

    def walk(node: dict[str, object], where: str) -> None:
        for key in ("title", "description"):
            value = node.get(key)
            if isinstance(value, str):
                found.append(Msg(value, f"{where}/{key}"))
        properties = node.get("properties")
        if isinstance(properties, dict):
            for name, prop in properties.items():
                if isinstance(prop, dict):
                    walk(prop, f"{where}/properties/{name}")
        choices = node.get("oneOf")
        if isinstance(choices, list):
            for n, choice in enumerate(choices):
                if isinstance(choice, dict):
                    walk(choice, f"{where}/oneOf/{n}")

    walk(schema, schema_path.name)
    return found


# --- .po files -------------------------------------------------------------------------------

_PO_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _po_unquote(token: str) -> str:
    body = token.strip()
    if not (body.startswith('"') and body.endswith('"')):
        raise ValueError(f"not a quoted .po string: {token!r}")
    return re.sub(r"\\(.)", lambda m: _PO_ESCAPES.get(m.group(1), m.group(1)), body[1:-1])


def _po_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def read_po(path: Path) -> dict[str, str]:
    """msgid -> msgstr; the header is under the empty msgid."""
    entries: dict[str, str] = {}
    msgid: str | None = None
    msgstr: str | None = None
    field = ""
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        try:
            if line.startswith("msgid "):
                if msgid is not None and msgstr is not None:
                    entries[msgid] = msgstr
                msgid, msgstr, field = _po_unquote(line[6:]), None, "id"
            elif line.startswith("msgstr "):
                msgstr, field = _po_unquote(line[7:]), "str"
            elif line.startswith('"'):
                if field == "id" and msgid is not None:
                    msgid += _po_unquote(line)
                elif field == "str" and msgstr is not None:
                    msgstr += _po_unquote(line)
                else:
                    raise ValueError("a continued string outside an entry")
            elif line and not line.startswith("#"):
                raise ValueError(f"unexpected line {line!r}")
        except ValueError as error:
            raise ValueError(f"{path}:{n}: {error}") from None
    if msgid is not None and msgstr is not None:
        entries[msgid] = msgstr
    return entries


def po_language(entries: dict[str, str], path: Path) -> str:
    match = re.search(r"^Language:\s*(\S+)", entries.get("", ""), re.M)
    if not match:
        raise ValueError(f"{path}: the header has no Language")
    return match.group(1)


def add_missing(path: Path, wanted: list[Msg]) -> list[str]:
    """Append the msgids the .po lacks, untranslated; the added msgids."""
    have = read_po(path)
    added: list[str] = []
    chunks: list[str] = []
    for msg in wanted:
        if msg.text in have or msg.text in added:
            continue
        added.append(msg.text)
        chunks.append(f'\n#: {msg.where}\nmsgid {_po_quote(msg.text)}\nmsgstr ""\n')
    if chunks:
        with path.open("a", encoding="utf-8") as out:
            out.write("".join(chunks))
    return added


# --- Jed JSON ---------------------------------------------------------------------------------


def jed_json(entries: dict[str, str], language: str) -> str:
    """The catalog as JupyterLab's translation manager loads it (`loadJSON`): a header under ""
    with the language as the browser names it (zh-CN) and the plural forms, then msgid: [msgstr].
    """
    plural = re.search(r"^Plural-Forms:\s*(.+?);?\s*$", entries.get("", ""), re.M)
    data: dict[str, object] = {
        "": {
            "domain": DOMAIN,
            "language": language.replace("_", "-"),
            "plural_forms": (plural.group(1) + ";") if plural else "nplurals=2; plural=(n != 1);",
        }
    }
    for msgid in sorted(k for k in entries if k):
        if entries[msgid]:
            data[msgid] = [entries[msgid]]
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n"


def catalogs(root: Path) -> list[Path]:
    return sorted((root / "deeptutor_jupyter" / "locale").glob(f"*/LC_MESSAGES/{DOMAIN}.po"))


def wanted_messages(root: Path) -> tuple[list[Msg], list[str]]:
    found, problems = source_messages(root / "labextension" / "src")
    return [*found, *schema_messages(root / "labextension" / "schema" / "plugin.json")], problems


def check(root: Path) -> list[str]:
    """Every problem, in words; empty when the catalogs are complete and current."""
    wanted, problems = wanted_messages(root)
    texts = {m.text for m in wanted}
    pos = catalogs(root)
    if not pos:
        problems.append(f"no {DOMAIN}.po under deeptutor_jupyter/locale/")
    for po in pos:
        entries = read_po(po)
        language = po_language(entries, po)
        rel = po.relative_to(root)
        for msg in wanted:
            if not entries.get(msg.text):
                problems.append(f"{rel}: no {language} text for {msg.text!r} ({msg.where})")
        for msgid in sorted(set(entries) - texts - {""}):
            problems.append(f"{rel}: obsolete entry {msgid!r} (no __() or schema text has it)")
        target = po.with_suffix(".json")
        if not target.exists() or target.read_text(encoding="utf-8") != jed_json(entries, language):
            problems.append(
                f"{target.relative_to(root)} is not what {rel} generates: "
                "run python scripts/i18n_catalog.py"
            )
    # A msgid reported once per .po is enough; keep the order.
    return list(dict.fromkeys(problems))


def write(root: Path) -> list[Path]:
    written = []
    for po in catalogs(root):
        entries = read_po(po)
        target = po.with_suffix(".json")
        target.write_text(jed_json(entries, po_language(entries, po)), encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail when a catalog is incomplete")
    mode.add_argument("--add", action="store_true", help="add missing msgids to each .po")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (tests)")
    args = parser.parse_args(argv)
    root: Path = args.root
    if args.check:
        problems = check(root)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    if args.add:
        wanted, problems = wanted_messages(root)
        for problem in problems:
            print(problem, file=sys.stderr)
        for po in catalogs(root):
            for msgid in add_missing(po, wanted):
                print(f"{po.relative_to(root)}: added {msgid!r}")
        return 1 if problems else 0
    for target in write(root):
        print(f"wrote {target.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
