"""Worker entries, scrapes and grants: lossless both ways, refusals name the field."""

from __future__ import annotations

import json

import pytest

from control_plane.contracts.grants import Grant, GrantError, decode_grant
from control_plane.contracts.workers import (
    WorkerEntry,
    WorkerError,
    WorkerSample,
    decode_entry,
    decode_sample,
    encode_entry,
)


def test_a_worker_entry_round_trips_and_writes_only_what_it_sets() -> None:
    entry = WorkerEntry("w1", "http://w1", "draining", "m", "sim", "tiny", 64, 4096)
    assert decode_entry("w1", encode_entry(entry)) == entry
    partial = WorkerEntry("w2", max_num_seqs=32)
    assert encode_entry(partial) == {"id": '"w2"', "max_num_seqs": "32"}
    assert partial.active and not entry.active


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"max_num_seqs": '"many"'}, "max_num_seqs: expected an integer, got str"),
        ({"url": "http://unquoted"}, "url: not JSON"),
        ({"status": '"asleep"'}, "status: must be one of"),
    ],
)
def test_a_bad_worker_entry_is_refused_naming_the_field(
    fields: dict[str, str], message: str
) -> None:
    with pytest.raises(WorkerError, match=r"^" + message):
        decode_entry("w1", {"id": '"w1"', **fields})


def test_a_scrape_round_trips_through_json() -> None:
    sample = WorkerSample(True, 5.0, 3, 1, 0.25, 2, 8192, {"m": 2048, "n": None}, None)
    wire = json.loads(json.dumps({**sample.to_json(), "at": 5.1}))
    assert decode_sample(wire) == sample
    with pytest.raises(WorkerError, match=r"^running: expected a number"):
        decode_sample({"healthy": True, "running": "3"})
    with pytest.raises(WorkerError, match=r"^models.m: expected an integer"):
        decode_sample({"healthy": True, "models": {"m": "big"}})


def test_grants_decode_from_their_text_fields() -> None:
    fields = {"id": "r1", "worker_id": "w1", "worker_url": "http://w1", "granted_at": "1.5"}
    assert decode_grant({**fields, "attempt": "2"}) == Grant("r1", "w1", "http://w1", 1.5, 2)
    assert decode_grant(fields).attempt == 1
    with pytest.raises(GrantError, match=r"^grant lacks worker_id, worker_url"):
        decode_grant({"id": "r1"})
    with pytest.raises(GrantError, match=r"^granted_at is not a number"):
        decode_grant({**fields, "granted_at": "soon"})
