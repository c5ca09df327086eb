"""``deeptutor-jupyter``: command-line helpers that need no kernel.

``scrub`` removes the tutor's trace bundles from notebooks before they are shared; everything
else in the file stays byte-identical. ``schema events`` / ``schema ask_user`` print the JSON
Schema of the runtime's contracts. ``mcp`` and ``acp`` serve the tutor to other hosts (hosts/).
Exit codes: 0 done, 1 a file could not be scrubbed (or, with ``--check``, still holds trace
bundles), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from deeptutor_jupyter.words import plural


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
    course = commands.add_parser(
        "course",
        help="publish a course pack to the class's JupyterHub course service (instructors)",
        description=(
            "Course packs (docs/hub.md): a folder with TUTOR.md, skills/ and kb/ that every "
            "student's kernel receives read-only. Run it in a terminal of your own hub server: "
            "the service's address and your hub token come from its environment."
        ),
    )
    course.add_argument("action", choices=("publish", "list", "withdraw", "policy"))
    course.add_argument(
        "target",
        nargs="?",
        help="publish: the folder; withdraw: the pack name; policy: the hub group",
    )
    course.add_argument(
        "--file",
        help="policy: set the group's AI policy from this YAML file (docs/policy.md); "
        "without --file or --clear, show it and its changes",
    )
    course.add_argument("--clear", action="store_true", help="policy: clear the group's policy")
    course.add_argument("--name", help="the pack's name (default: the folder's name)")
    course.add_argument("--group", help="the hub group it is for (default: every student)")
    course.add_argument(
        "--url", help="the service's /v1 address (default: $DEEPTUTOR_HUB_SERVICE_URL)"
    )
    mcp = commands.add_parser(
        "mcp",
        help="serve the tutor over MCP (stdio, or streamable HTTP with --http PORT)",
        description=(
            "Serve the tutor as an MCP server (docs/mcp.md): tools ask, search_knowledge, "
            "pending, answer, quiz, answer_quiz, with your settings and memory. Needs the "
            "[mcp] extra."
        ),
    )
    mcp.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on this port")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    commands.add_parser(
        "acp",
        help="serve the tutor as an ACP agent on stdio (jupyter-ai 3 and other ACP hosts)",
        description=(
            "Serve the tutor as an Agent Client Protocol agent on stdio (docs/mcp.md). "
            "Needs the [acp] extra."
        ),
    )
    return parser


def _acp() -> int:
    try:
        from deeptutor_jupyter.hosts.acp_agent import serve
    except ImportError as exc:
        print(f"deeptutor-jupyter acp: {exc}; install deeptutor-jupyter[acp]", file=sys.stderr)
        return 2
    serve()
    return 0


def _mcp(args: argparse.Namespace) -> int:
    try:
        from deeptutor_jupyter.hosts.mcp_server import serve
    except ImportError as exc:
        print(f"deeptutor-jupyter mcp: {exc}; install deeptutor-jupyter[mcp]", file=sys.stderr)
        return 2
    if args.http is None:
        serve("stdio")
    else:
        serve("streamable-http", args.host, args.http, mcp_token())
    return 0


def mcp_token() -> str:
    """``$DEEPTUTOR_MCP_TOKEN``, or a new one kept in ``$DEEPTUTOR_HOME/mcp-token`` (mode 0600)
    for the MCP host's configuration; its path is printed, never the token."""
    import os
    import secrets

    from deeptutor_jupyter._files import atomic_write_text
    from deeptutor_jupyter.config import settings_path

    token = os.environ.get("DEEPTUTOR_MCP_TOKEN", "").strip()
    if token:
        return token
    path = settings_path().parent / "mcp-token"
    if path.is_file() and (token := path.read_text(encoding="utf-8").strip()):
        print(f"deeptutor-jupyter mcp: the bearer token is in {path}", file=sys.stderr)
        return token
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, token + "\n")
    print(f"deeptutor-jupyter mcp: a new bearer token is in {path}", file=sys.stderr)
    return token


def _events_schema() -> dict[str, object]:
    from deeptutor_jupyter.agent.events import events_schema

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
                    bundles = plural(found, "trace bundle", "trace bundles")
                    print(f"{notebook}: {bundles}; run: deeptutor-jupyter scrub")
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
            print(f"{notebook}{where}: removed {plural(removed, 'trace bundle', 'trace bundles')}")
        else:
            print(f"{notebook}{where}: no trace bundles; unchanged")
    return status


def _course_policy(args: argparse.Namespace, url: str, headers: dict[str, str]) -> int:
    """``course policy GROUP [--file F | --clear]``: a group's AI policy on the service."""
    import httpx

    if not args.target:
        print("deeptutor-jupyter course policy: name the hub group", file=sys.stderr)
        return 2
    from deeptutor_jupyter.providers.hub_link import hub_client

    where = f"{url}/policies/{args.target}"
    try:
        with hub_client(headers=headers, timeout=30) as client:
            if args.file:
                text = Path(args.file).read_text(encoding="utf-8")
                r = client.put(where, content=text.encode("utf-8"))
            elif args.clear:
                r = client.delete(where)
            else:
                r = client.get(where)
    except (OSError, httpx.HTTPError) as exc:
        print(f"deeptutor-jupyter course policy: {exc}", file=sys.stderr)
        return 1
    if r.status_code != 200:
        said = r.json().get("error", {}).get("message", r.status_code)
        print(f"deeptutor-jupyter course policy: {said}", file=sys.stderr)
        return 1
    done = r.json()
    if args.file or args.clear:
        what = "set" if done["policy"] else "cleared (the packs' policies apply)"
        print(f"group {args.target}: policy {what}")
        return 0
    print(done["policy"] or f"group {args.target}: no policy set here (the packs' apply)")
    for row in done["audit"]:
        before = row["old"].strip() or "(none)"
        after = row["new"].strip() or "(cleared)"
        print(f"{row['at']}  {row['who']}: {before!r} -> {after!r}")
    return 0


def _course(args: argparse.Namespace) -> int:
    import os

    import httpx

    from deeptutor_jupyter.config import hub_token
    from deeptutor_jupyter.providers.hub_link import hub_client
    from deeptutor_jupyter.runtime.course_files import PackError, publish

    url = (args.url or os.environ.get("DEEPTUTOR_HUB_SERVICE_URL", "")).strip().rstrip("/")
    token = hub_token(os.environ)
    if not url or not token:
        print(
            "deeptutor-jupyter course: run it in a terminal of your hub server (it needs "
            "DEEPTUTOR_HUB_SERVICE_URL and JUPYTERHUB_API_TOKEN), or pass --url.",
            file=sys.stderr,
        )
        return 2
    headers = {"Authorization": f"Bearer {token}"}
    if args.action == "policy":
        return _course_policy(args, url, headers)
    try:
        if args.action == "publish":
            if not args.target:
                print("deeptutor-jupyter course publish: name the folder", file=sys.stderr)
                return 2
            folder = Path(args.target)
            name = args.name or folder.resolve().name.lower()
            done = publish(folder, name, args.group, url, token)
            pack = done["pack"]
            what = "published" if done["new_version"] else "unchanged, still"
            audience = f"group {pack['group']}" if pack["group"] else "every student"
            print(
                f"{pack['name']}: {what} version {pack['version']} for {audience} "
                f"({len(pack['files'])} files, sha256 {pack['sha256'][:12]})"
            )
            if done.get("warning"):
                print(f"warning: {done['warning']}", file=sys.stderr)
            return 0
        with hub_client(headers=headers, timeout=30) as client:
            if args.action == "withdraw":
                r = client.delete(f"{url}/packs/{args.target}")
            else:
                r = client.get(f"{url}/packs")
    except (PackError, httpx.HTTPError) as exc:
        print(f"deeptutor-jupyter course: {exc}", file=sys.stderr)
        return 1
    if r.status_code != 200:
        print(
            f"deeptutor-jupyter course: {r.json().get('error', {}).get('message', r.status_code)}",
            file=sys.stderr,
        )
        return 1
    if args.action == "withdraw":
        print(f"{args.target}: withdrawn")
    for pack in r.json().get("packs", []):
        audience = pack["group"] or "everyone"
        print(
            f"{pack['name']}  v{pack['version']}  for {audience}  {len(pack['files'])} files  "
            f"by {pack['published_by']} at {pack['published_at']}"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "scrub":
        return _scrub(args)
    if args.command == "course":
        return _course(args)
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "acp":
        return _acp()
    if args.command == "schema":
        import json

        print(json.dumps(SCHEMAS[args.contract](), indent=2, sort_keys=True))
        return 0
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
