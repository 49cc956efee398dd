"""Binding a gateway's port: alone, a taken port fails at once naming it; with SO_REUSEPORT,
several gateway processes bind the same port, and a process that does not share is refused."""

from __future__ import annotations

import pytest

from control_plane.gateway.serving import PortUnavailable, bound_socket, uvicorn_options
from control_plane.settings import SettingsError, load_settings
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


def test_the_drain_on_shutdown_is_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: uvicorn's graceful shutdown was a fixed 10 s, whatever the orchestrator's
    grace period; Kubernetes gives the gateway 45 s to let streams end."""
    assert uvicorn_options(load_settings())["timeout_graceful_shutdown"] == 10
    monkeypatch.setenv("ARBITER_SHUTDOWN_GRACE_S", "45")
    assert uvicorn_options(load_settings())["timeout_graceful_shutdown"] == 45
    monkeypatch.setenv("ARBITER_SHUTDOWN_GRACE_S", "0")
    with pytest.raises(SettingsError, match="ARBITER_SHUTDOWN_GRACE_S"):
        load_settings()
