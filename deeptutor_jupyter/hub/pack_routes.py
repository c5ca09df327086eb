"""The course packs over HTTP, under ``{prefix}v1/packs`` (hub-token auth, like the gateway).

- ``GET v1/packs``: the latest version of every pack for the caller's groups (an instructor
  sees them all). Names, versions, SHA-256 and the file list; never another student's data.
- ``GET v1/packs/<name>/<version>``: the archive, for a caller the pack is meant for.
- ``PUT v1/packs/<name>?group=<hub group>``: an instructor publishes (body: the .tar.gz that
  ``deeptutor-jupyter course publish`` builds). Students get 403: a pack is read-only to them.
- ``DELETE v1/packs/<name>``: an instructor withdraws a pack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import aiohttp

from deeptutor_jupyter.hub.auth import Identity
from deeptutor_jupyter.hub.gateway import ApiHandler, GatewayState
from deeptutor_jupyter.hub.packs import EVERYONE, PackRefused, PackStore


class PackHandler(ApiHandler):
    @property
    def store(self) -> PackStore:
        assert self.state.packs is not None
        return self.state.packs

    def is_instructor(self, identity: Identity) -> bool:
        return self.state.config.is_instructor(identity.name, identity.groups)

    async def instructor(self) -> Identity | None:
        identity = await self.identify()
        if identity is not None and not self.is_instructor(identity):
            self.fail(403, "not_instructor", "Only the course's instructors may publish packs.")
            return None
        return identity


class PackListHandler(PackHandler):
    async def get(self) -> None:
        identity = await self.identify()
        if identity is None:
            return
        if self.is_instructor(identity):
            found = await self.state.db(self.store.latest)
        else:
            found = await self.state.db(self.store.for_student, identity.groups)
        self.finish({"packs": [p.public() for p in found]})


class PackHandlerByName(PackHandler):
    async def put(self, name: str) -> None:
        identity = await self.instructor()
        if identity is None:
            return
        group = self.get_argument("group", EVERYONE)
        key = self.state.key.get_secret_value() if self.state.key is not None else None
        try:
            info, new = await self.state.db(
                self.store.publish, name, group, self.request.body, identity.name, key
            )
        except PackRefused as exc:
            self.fail(400, "pack_refused", str(exc))
            return
        self.state.forget_policies()  # the next request here follows the new policy
        self.set_status(201 if new else 200)
        reply: dict[str, Any] = {"pack": info.public(), "new_version": new}
        warning = await self._audience_warning(info.audience)
        if warning:
            reply["warning"] = warning
        self.finish(reply)

    async def _audience_warning(self, group: str) -> str | None:
        """Words for a pack published to a group nobody is in (a typo publishes to no one)."""
        if group == EVERYONE or self.state.group_members is None:
            return None
        members = await self.state.group_members(group)
        if members is None:
            return None  # the hub could not be asked: no guess
        if members < 0:
            return f"The hub has no group {group!r}: no student receives this pack. Check the name."
        if members == 0:
            return f"The hub's group {group!r} has no members yet: no student receives this pack."
        return None

    async def delete(self, name: str) -> None:
        if await self.instructor() is None:
            return
        removed = await self.state.db(self.store.withdraw, name)
        if not removed:
            self.fail(404, "no_pack", f"There is no pack named {name!r}.")
            return
        self.state.forget_policies()
        self.finish({"withdrawn": name, "versions": removed})


class PackArchiveHandler(PackHandler):
    async def get(self, name: str, version: str) -> None:
        identity = await self.identify()
        if identity is None:
            return
        found = await self.state.db(self.store.archive, name, int(version))
        info = found[0] if found is not None else None
        meant = info is not None and (
            info.audience == EVERYONE
            or info.audience in identity.groups
            or self.is_instructor(identity)
        )
        if found is None or not meant:
            # The same answer for "none" and "not yours": group names are not disclosed.
            self.fail(404, "no_pack", f"No pack {name} version {version} for you.")
            return
        self.set_header("Content-Type", "application/gzip")
        self.set_header("X-Pack-SHA256", found[0].sha256)
        self.set_header("Cache-Control", "private, max-age=31536000, immutable")
        self.finish(found[1])


def hub_group_counter(
    api_url: str, token: str, state: GatewayState
) -> Callable[[str], Awaitable[int | None]]:
    """How many members a hub group has (-1: no such group; None: the hub did not say), asked
    with the service's own token (configure() gives it ``read:groups``)."""

    async def members(group: str) -> int | None:
        url = f"{api_url.rstrip('/')}/groups/{quote(group, safe='')}"
        try:
            async with state.session().get(
                url,
                headers={"Authorization": f"token {token}"},
                timeout=aiohttp.ClientTimeout(total=10),
            ) as r:
                if r.status == 404:
                    return -1
                if r.status != 200:
                    return None
                return len((await r.json()).get("users") or [])
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    return members


def pack_routes(prefix: str, state: GatewayState) -> list[Any]:
    args = {"state": state}
    name = r"([a-z0-9][a-z0-9_-]{0,47})"
    return [
        (prefix + "v1/packs", PackListHandler, args),
        (prefix + f"v1/packs/{name}", PackHandlerByName, args),
        (prefix + f"v1/packs/{name}/([0-9]{{1,9}})", PackArchiveHandler, args),
    ]
