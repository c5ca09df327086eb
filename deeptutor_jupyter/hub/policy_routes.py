"""A group's AI policy over HTTP, under ``{prefix}v1/policies/<group>`` (hub-token auth, for
``deeptutor-jupyter course policy``; instructors only, students get 403):

- ``GET``: the policy set for the group ("" when none) and its audit log, newest first.
- ``PUT`` (body: the policy's YAML): set it; a policy that cannot be read is a 400 that says
  what is wrong and where, and nothing changes.
- ``DELETE``: clear it (the packs' policies apply again).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from deeptutor_jupyter.hub.auth import Identity
from deeptutor_jupyter.hub.gateway import GatewayState
from deeptutor_jupyter.hub.pack_routes import PackHandler
from deeptutor_jupyter.learning.policy import PolicyError


class GroupPolicyHandler(PackHandler):
    async def instructor(self) -> Identity | None:
        identity = await self.identify()
        if identity is not None and not self.is_instructor(identity):
            self.fail(403, "not_instructor", "Only the course's instructors may set a policy.")
            return None
        return identity

    async def get(self, group: str) -> None:
        if await self.instructor() is None:
            return
        store = self.state.group_policy
        self.finish(
            {
                "group": group,
                "policy": await self.state.db(store.text, group),
                "audit": [dataclasses.asdict(r) for r in await self.state.db(store.audit, group)],
            }
        )

    async def put(self, group: str) -> None:
        await self._set(group, self.request.body.decode("utf-8", errors="replace"))

    async def delete(self, group: str) -> None:
        await self._set(group, None)

    async def _set(self, group: str, text: str | None) -> None:
        identity = await self.instructor()
        if identity is None:
            return
        try:
            await self.state.db(self.state.group_policy.set, group, text, identity.name)
        except PolicyError as exc:
            self.fail(400, "policy_invalid", str(exc))
            return
        self.state.forget_policies()  # the next request here follows it
        self.finish({"group": group, "policy": text or ""})


def policy_routes(prefix: str, state: GatewayState) -> list[Any]:
    return [(prefix + r"v1/policies/([\w.@+-]{1,255})", GroupPolicyHandler, {"state": state})]
