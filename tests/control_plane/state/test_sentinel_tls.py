"""Sentinel mode with TLS data nodes: the URL's TLS options (a private CA) reach every data
connection, as they do without Sentinel."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from control_plane.state import connect
from control_plane.state.client import ping
from control_plane.state.sentinel import SentinelTarget
from tests.support.ports import free_port
from tests.support.sentinel import SERVICE, sentinel_command


def _need(found: object, what: str) -> None:
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"no {what}")
        pytest.skip(f"no {what}")


def _certificates(folder: Path) -> dict[str, Path]:
    """A private CA and a certificate for 127.0.0.1 that it signed."""
    files = {name: folder / name for name in ("ca.crt", "ca.key", "node.crt", "node.key")}
    csr, ext = folder / "node.csr", folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for argv in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", files["ca.key"],
         "-out", files["ca.crt"], "-days", "2", "-subj", "/CN=arbiter-test-ca"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", files["node.key"], "-out", csr,
         "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", csr, "-CA", files["ca.crt"], "-CAkey", files["ca.key"],
         "-CAcreateserial", "-out", files["node.crt"], "-days", "2", "-extfile", ext],
    ):  # fmt: skip
        subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True)
    return files


@pytest.fixture
def tls_sentinel(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    """(TLS port of a primary, plain port of a Sentinel that watches it over TLS, CA file)."""
    command, server = sentinel_command(), shutil.which("redis-server")
    _need(command and server, "redis-sentinel or redis-server")
    _need(shutil.which("openssl"), "openssl")
    assert command is not None and server is not None
    certs = _certificates(tmp_path)
    tls = [f"tls-cert-file {certs['node.crt']}", f"tls-key-file {certs['node.key']}",
           f"tls-ca-cert-file {certs['ca.crt']}", "tls-auth-clients no"]  # fmt: skip
    node_port, sentinel_port = free_port(), free_port()
    node_conf, sentinel_conf = tmp_path / "node.conf", tmp_path / "sentinel.conf"
    node_conf.write_text(
        "\n".join([f"port 0\ntls-port {node_port}\nbind 127.0.0.1\nsave ''", *tls, ""])
    )
    sentinel_conf.write_text(
        "\n".join([
            f"port {sentinel_port}\nbind 127.0.0.1\ndir {tmp_path}\ntls-replication yes", *tls,
            f"sentinel monitor {SERVICE} 127.0.0.1 {node_port} 1", "",
        ])
    )  # fmt: skip
    procs = [
        subprocess.Popen([server, str(node_conf)], cwd=tmp_path, stdout=subprocess.DEVNULL),
        subprocess.Popen([command[0], str(sentinel_conf), *command[1:]], stdout=subprocess.DEVNULL),
    ]
    try:
        if procs[0].poll() is not None or not _names(sentinel_port, node_port):
            _need(False, "redis-server with TLS")
        yield node_port, sentinel_port, certs["ca.crt"]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def _names(sentinel_port: int, node_port: int, timeout_s: float = 10) -> bool:
    """Whether the Sentinel names the node as a primary it reaches, within `timeout_s`."""
    client = redis.Redis(port=sentinel_port, decode_responses=True)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                state = client.sentinel_master(SERVICE)
                if (
                    state["port"] == node_port
                    and not state["is_sdown"]
                    and state["role-reported"] == "master"
                ):
                    return True
            except redis.RedisError:
                pass
            time.sleep(0.1)
        return False
    finally:
        client.close()


async def test_a_private_ca_in_the_url_reaches_the_data_nodes_in_sentinel_mode(
    tls_sentinel: tuple[int, int, Path],
) -> None:
    node_port, sentinel_port, ca = tls_sentinel
    url = f"rediss://127.0.0.1:{node_port}/0?ssl_ca_certs={ca}"
    direct = connect(url)
    try:
        await ping(direct)  # the URL is right: it works without Sentinel
    finally:
        await direct.aclose()
    target = SentinelTarget((("127.0.0.1", sentinel_port),), SERVICE)
    client = connect(f"rediss://ignored:1/0?ssl_ca_certs={ca}", sentinel=target)
    try:
        await client.set("k", "v")
        assert await client.get("k") == "v"
    finally:
        await client.aclose()
