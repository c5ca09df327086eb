"""Test servers' ports: never in the kernels' ephemeral range, never the same in two processes.

A JupyterLab test once polled a port that a kernel's ZMQ socket had taken between the pick and
the server's bind (see deeptutor_jupyter/testing/ports.py)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from deeptutor_jupyter.testing.ports import _ephemeral_floor, free_port, refused_port


def test_ports_are_below_the_ephemeral_range_and_never_repeat() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(20000 <= p < _ephemeral_floor() for p in ports)
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free to bind for the server it was picked for


def test_another_process_is_never_handed_a_port_this_one_holds() -> None:
    mine = {free_port() for _ in range(100)}
    code = (
        "from deeptutor_jupyter.testing.ports import free_port\n"
        "print(*[free_port() for _ in range(6000)])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    theirs = {int(p) for p in out.stdout.split()}
    assert len(theirs) == 6000
    assert not mine & theirs


def test_a_refused_port_refuses_for_as_long_as_it_is_held() -> None:
    port = refused_port()
    for _ in range(3):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
    with socket.socket() as s, pytest.raises(OSError):
        s.bind(("127.0.0.1", port))  # nobody else can take it meanwhile
