"""The e2e driver itself: a stale shell reply never passes for the reply to a later request."""

from __future__ import annotations

import pytest

from tests.e2e.kernel_driver import KernelDriver

pytestmark = pytest.mark.e2e


def test_execute_matches_its_reply_by_msg_id(kernel: KernelDriver):
    # What wait_for_ready leaves behind under load: kernel_info requests whose replies arrive
    # late, ahead of the reply to the next execute_request.
    for _ in range(3):
        kernel.kc.kernel_info()
    msg_id = kernel.execute("x = 6 * 7")
    assert kernel.last_reply["parent_header"]["msg_id"] == msg_id
    assert kernel.last_reply["msg_type"] == "execute_reply"
    assert kernel.stream_text(kernel.execute("print(x)")).strip() == "42"
