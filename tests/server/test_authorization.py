"""A user the server's authorizer does not allow on the ``deeptutor`` resource is refused, even
with a valid token (the handlers are ``@authorized``, not only ``@authenticated``)."""

from __future__ import annotations

from typing import Any

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError

from deeptutor_jupyter.store.db import Store
from tests.server.conftest import ask


class NoTutor(Authorizer):  # type: ignore[misc]
    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return resource != "deeptutor"


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"deeptutor_jupyter": True},
            "authorizer_class": NoTutor,
        }
    }


@pytest.mark.parametrize("route", ["pending", "memory", "kbs", "traces", "mastery"])
def test_a_user_not_authorized_for_the_tutor_is_refused(
    run: Any, jp_fetch: Any, store: Store, route: str
) -> None:
    ask(store, "a.ipynb", session_id="nb-aaaaaa-1")
    with pytest.raises(HTTPClientError) as caught:
        run(jp_fetch("deeptutor", "api", route))
    assert caught.value.code == 403
    # The server itself still answers this user: only the tutor's resource is closed.
    assert run(jp_fetch("api", "status")).code == 200


def test_an_unauthorized_answer_changes_nothing(run: Any, jp_fetch: Any, store: Store) -> None:
    row = ask(store, "a.ipynb", session_id="nb-aaaaaa-1")
    with pytest.raises(HTTPClientError) as caught:
        run(
            jp_fetch(
                "deeptutor", "api", "pending", row.request_id, method="POST",
                body='{"session_id": "nb-aaaaaa-1", "selections": ["safe"]}',
            )
        )  # fmt: skip
    assert caught.value.code == 403
    assert store.get_pending(row.request_id).status == "pending"  # type: ignore[union-attr]
