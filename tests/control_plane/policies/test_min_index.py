"""LazyMinIndex answers exactly what a scan of every member would, whatever the key moves."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.policies.min_index import LazyMinIndex

OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "leave", "grow", "shrink", "least"]),
        st.integers(0, 15),
        st.integers(0, 50),
    ),
    max_size=300,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_least_is_the_minimum_of_the_current_keys(ops: list[tuple[str, int, int]]) -> None:
    keys: dict[int, float] = {}
    index: LazyMinIndex[int] = LazyMinIndex(lambda m: (keys[m], m))
    for op, member, amount in ops:
        if op == "join" and member not in keys:
            keys[member] = float(amount)
            index.touch(member)
        elif op == "leave" and member in keys:
            del keys[member]
            index.discard(member)
        elif op == "grow" and member in keys:
            keys[member] += amount  # unannounced: keys may grow behind the index's back
        elif op == "shrink" and member in keys:
            keys[member] -= amount
            index.touch(member)  # a smaller key is announced
        expected = min(((k, m) for m, k in keys.items()), default=None)
        found = index.least()
        assert (found[0] if found else None) == expected
        assert len(index) == len(keys)


def test_stale_entries_are_compacted() -> None:
    keys = {m: float(m) for m in range(10)}
    index: LazyMinIndex[int] = LazyMinIndex(lambda m: (keys[m], m))
    for m in keys:
        index.touch(m)
    for _ in range(1000):  # a member re-filed over and over leaves superseded entries
        keys[3] -= 0.01
        index.touch(3)
    assert len(index._heap) <= 2 * len(index) + 64 + 1
    assert index.least() == ((keys[3], 3), 3)


def test_reset_holds_exactly_the_members_given() -> None:
    keys = {m: float(-m) for m in range(5)}
    index: LazyMinIndex[int] = LazyMinIndex(lambda m: (keys[m], m))
    index.touch(4)
    index.reset([0, 1, 2])
    assert sorted(index.members()) == [0, 1, 2]
    assert index.least() == ((-2.0, 2), 2)
