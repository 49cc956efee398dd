"""ExFairS accounts: each client's credits and the resource (priority) they bought."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from control_plane.core.ledger.records import Node


@dataclass(slots=True)
class Account:
    """ExFairS micro-economy of one client: credits spent buy resource (priority)."""

    credit: int = 0
    resource: int = 0


class AccountBook:
    """Every node's `Account`; reading with `find` never creates one."""

    def __init__(self) -> None:
        self.accounts: dict[Node, Account] = {}

    def account(self, node: Node) -> Account:
        account = self.accounts.get(node)
        if account is None:
            account = self.accounts[node] = Account()
        return account

    def to_json(self) -> list[list[Any]]:
        return [[list(n), a.credit, a.resource] for n, a in sorted(self.accounts.items())]

    def load_json(self, data: list[list[Any]]) -> None:
        self.accounts = {tuple(n): Account(int(c), int(r)) for n, c, r in data}
