"""Binding a gateway's port: alone, a taken port fails at once naming it; with SO_REUSEPORT,
several gateway processes bind the same port, and a process that does not share is refused."""

from __future__ import annotations

import pytest

from control_plane.gateway.serving import PortUnavailable, bound_socket
from tests.support.ports import free_port


def test_shared_sockets_bind_one_port_and_a_plain_one_is_refused() -> None:
    port = free_port()
    first = bound_socket("127.0.0.1", port, reuse_port=True)
    second = bound_socket("127.0.0.1", port, reuse_port=True)
    try:
        first.listen()
        second.listen()
        assert first.getsockname() == second.getsockname() == ("127.0.0.1", port)
        with pytest.raises(PortUnavailable, match=f"cannot bind 127.0.0.1:{port}: "):
            bound_socket("127.0.0.1", port, reuse_port=False)
    finally:
        first.close()
        second.close()


def test_a_port_held_by_a_plain_listener_is_refused_to_a_sharing_one() -> None:
    port = free_port()
    plain = bound_socket("127.0.0.1", port, reuse_port=False)
    try:
        plain.listen()
        with pytest.raises(PortUnavailable, match=r"\(shared with SO_REUSEPORT\)"):
            bound_socket("127.0.0.1", port, reuse_port=True)
    finally:
        plain.close()
