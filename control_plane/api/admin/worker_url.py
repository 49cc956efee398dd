"""What a worker URL must be: `http(s)://host[:port][/path]` with a real host and port.

Rule: the host is an IPv4 address, a bracketed IPv6 address or a DNS name (labels of letters,
digits and hyphens, at most 63 characters each, 253 in all); the port, when given, is 1..65535;
no user info, query or fragment. Guarantee: a URL that passes can be split, probed and used as
the worker's default id (`host:port`) without raising.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9\-]{0,61}[A-Za-z0-9])?")


def _valid_host(host: str) -> bool:
    if ":" in host:  # urlsplit took the brackets off an IPv6 address
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    if not host or len(host) > 253:
        return False
    return all(_LABEL.fullmatch(label) for label in host.removesuffix(".").split("."))


def check_worker_url(url: str) -> str:
    """`url` when it is a usable worker URL; ValueError saying what is wrong otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not an integer 0..65535
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise ValueError("a worker URL has no user info, query or fragment")
    if port == 0:
        raise ValueError("the port must be 1..65535")
    if not _valid_host(parts.hostname or ""):
        raise ValueError(f"{parts.hostname!r} is not a valid host name or IP address")
    return url
