"""What the course service keeps for its LMS: the registration, the store, the services'
client and the score outbox (one of each per service process)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import aiohttp

from deeptutor_jupyter.hub.lti.config import LTIConfig
from deeptutor_jupyter.hub.lti.outbox import Outbox
from deeptutor_jupyter.hub.lti.services import LMSClient
from deeptutor_jupyter.hub.lti.store import LTIStore

# The student's server copies a pack's notebook and opens it (server/course_open.py).
NOTEBOOK_OPEN = "hub/user-redirect/deeptutor/course/open"


@dataclass
class LTIState:
    config: LTIConfig
    store: LTIStore
    hub_base: str = "/"
    _client: LMSClient | None = None
    _outbox: Outbox | None = None

    def client(self, session: aiohttp.ClientSession) -> LMSClient:
        if self._client is None or self._client.session.closed:
            self._client = LMSClient(self.config, session)
        return self._client

    def outbox(self, session: aiohttp.ClientSession) -> Outbox:
        if self._outbox is None:
            self._outbox = Outbox(self.store, self.client(session))
        return self._outbox

    def notebook_url(self, notebook: str) -> str:
        if not notebook:
            return self.hub_base + "hub/user-redirect/lab"
        return f"{self.hub_base}{NOTEBOOK_OPEN}?notebook={quote(notebook, safe='')}"
