"""The node of least key among many, in O(log n), for keys that mostly grow on their own."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from heapq import heapify, heappop, heappush, heapreplace
from typing import Any, Generic, TypeVar

N = TypeVar("N", bound=Hashable)
Key = tuple[Any, ...]


class LazyMinIndex(Generic[N]):
    """The member with the smallest `key(member)`, where keys move without telling the index.

    Rule: the heap keeps, for each member, one live entry whose stored key is a lower bound of
    the member's current key. Keys may grow freely (a virtual counter is charged, a queue's head
    leaves); whoever makes a member's key *smaller* calls `touch` (a re-queued older request
    becomes the head). `least` checks the top entry against the current key and, when it has
    grown, re-files it and looks again: the first top whose stored key is current is the true
    minimum, since every other member's current key is at least its stored key, which is at
    least the top's. Stale entries (members gone, superseded stamps) are dropped as they
    surface, and the heap is rebuilt when they outnumber the members.
    Guarantee: `least` returns exactly `min(members, key=key)` (keys are unique); each call
    costs O(log n) plus O(log n) per member whose key grew since it was last filed. An entry
    is `(key[0], key, stamp, member)` (keys are non-empty tuples): ordered as `(key, stamp,
    member)`, but compared on the key's first item first (a counter), most of the heap's work.
    """

    __slots__ = ("_heap", "_key", "_stamp", "_stamps")

    def __init__(self, key: Callable[[N], Key]) -> None:
        self._key = key
        self._heap: list[tuple[Any, Key, int, N]] = []
        self._stamp: dict[N, int] = {}
        self._stamps = itertools.count()

    def __len__(self) -> int:
        return len(self._stamp)

    def __contains__(self, member: object) -> bool:
        return member in self._stamp

    def members(self) -> Iterable[N]:
        return self._stamp.keys()

    def touch(self, member: N) -> None:
        """Add `member`, or re-file it after its key may have become smaller."""
        stamp = next(self._stamps)
        self._stamp[member] = stamp
        key = self._key(member)
        heappush(self._heap, (key[0], key, stamp, member))
        if len(self._heap) > 2 * len(self._stamp) + 64:
            self.rebuild()

    def discard(self, member: N) -> None:
        self._stamp.pop(member, None)

    def least(self) -> tuple[Key, N] | None:
        """`(key, member)` of the member with the smallest current key; None when empty."""
        heap, stamps, key = self._heap, self._stamp, self._key
        while heap:
            _, stored, stamp, member = heap[0]
            if stamps.get(member) != stamp:
                heappop(heap)
                continue
            current = key(member)
            if current == stored:
                return current, member
            heapreplace(heap, (current[0], current, stamp, member))
        return None

    def reset(self, members: Iterable[N]) -> None:
        """Hold exactly `members`, each filed at its current key."""
        self._stamp = {member: next(self._stamps) for member in members}
        self.rebuild()

    def rebuild(self) -> None:
        """File every member afresh at its current key (after many changes at once)."""
        key, heap = self._key, []
        for member, stamp in self._stamp.items():
            k = key(member)
            heap.append((k[0], k, stamp, member))
        heapify(heap)
        self._heap = heap
