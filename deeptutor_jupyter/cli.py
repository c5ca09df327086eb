"""``deeptutor-jupyter``: command-line helpers that need no kernel.

``scrub`` removes the tutor's trace bundles from notebooks before they are shared; everything
else in the file stays byte-identical. ``schema events`` / ``schema ask_user`` print the JSON
Schema of the runtime's contracts. Exit codes: 0 done, 1 a file could not be scrubbed (or,
with ``--check``, still holds trace bundles), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deeptutor-jupyter", description="Helpers for deeptutor-jupyter notebooks."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    scrub = commands.add_parser(
        "scrub",
        help="remove tutor trace bundles from notebooks before sharing them",
        description=(
            "Remove application/vnd.deeptutor.trace+json bundles from notebook outputs. "
            "Everything else in the file is left byte-identical. Notebooks are changed in "
            "place unless -o is given."
        ),
    )
    scrub.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK")
    scrub.add_argument("-o", "--output", type=Path, help="write the result here (one notebook)")
    scrub.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if any notebook still holds trace bundles (for hooks)",
    )
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of a contract (the sidebar's TypeScript types come from it)",
    )
    schema.add_argument("contract", choices=sorted(SCHEMAS), help="which contract")
    return parser


def _events_schema() -> dict[str, object]:
    from deeptutor_jupyter.runtime.event_types import events_schema

    return events_schema()


def _ask_user_schema() -> dict[str, object]:
    from deeptutor_jupyter.interaction.schema import AskUserArgs, AskUserPayload

    return {
        "title": "DeepTutorAskUser",
        "$defs": {
            "AskUserArgs": AskUserArgs.model_json_schema(),
            "AskUserPayload": AskUserPayload.model_json_schema(),
        },
    }


SCHEMAS = {"events": _events_schema, "ask_user": _ask_user_schema}


def _scrub(args: argparse.Namespace) -> int:
    from deeptutor_jupyter.memory.scrub import NotebookError, count_bundles, scrub_notebook

    if args.output is not None and len(args.notebooks) != 1:
        print("deeptutor-jupyter scrub: -o takes exactly one notebook", file=sys.stderr)
        return 2
    status = 0
    for notebook in args.notebooks:
        try:
            if args.check:
                found = count_bundles(notebook)
                if found:
                    print(f"{notebook}: {found} trace bundle(s); run: deeptutor-jupyter scrub")
                    status = 1
                continue
            removed = scrub_notebook(notebook, args.output)
        except FileNotFoundError:
            print(f"{notebook}: no such file", file=sys.stderr)
            status = 1
            continue
        except (NotebookError, OSError) as exc:
            print(f"{notebook}: cannot scrub: {exc}", file=sys.stderr)
            status = 1
            continue
        where = f" -> {args.output}" if args.output is not None else ""
        if removed:
            print(f"{notebook}{where}: removed {removed} trace bundle(s)")
        else:
            print(f"{notebook}{where}: no trace bundles; unchanged")
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "scrub":
        return _scrub(args)
    if args.command == "schema":
        import json

        print(json.dumps(SCHEMAS[args.contract](), indent=2, sort_keys=True))
        return 0
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
