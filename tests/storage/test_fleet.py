"""The model registry and the worker registry."""

from __future__ import annotations

import pytest

from storage.db import Database
from storage.errors import AlreadyExistsError, InvalidValueError, NotFoundError


def test_models_upsert_get_list_delete(db: Database) -> None:
    with db.repos() as r:
        tiny = r.models.upsert(name="tiny", hidden_size=64, num_layers=2, max_model_len=2048)
        assert (tiny.kind, tiny.unified_cost_factor) == ("llm", None)
        r.models.upsert(name="img", kind="image", hidden_size=1024, num_layers=24)
        replaced = r.models.upsert(
            name="tiny", kind="vlm", hidden_size=128, num_layers=4, unified_cost_factor=0.5
        )
        assert (replaced.kind, replaced.hidden_size, replaced.max_model_len) == ("vlm", 128, None)
    with db.reader() as r:
        assert [m.name for m in r.models.list()] == ["img", "tiny"]
        assert r.models.get(name="tiny") == replaced
        assert r.models.get(name="nope") is None
    with db.repos() as r:
        with pytest.raises(InvalidValueError):
            r.models.upsert(name="bad", kind="text", hidden_size=1, num_layers=1)  # type: ignore[arg-type]
        with pytest.raises(InvalidValueError):
            r.models.upsert(name="bad", hidden_size=0, num_layers=1)
        assert r.models.delete(name="img") is True
        assert r.models.delete(name="img") is False


def test_workers_register_drain_and_reregister(db: Database) -> None:
    with db.repos() as r:
        w1 = r.workers.register(
            worker_id="w1", url="http://127.0.0.1:9001", kind="sim", model="tiny", max_num_seqs=8
        )
        assert (w1.status, w1.max_num_seqs, w1.profile) == ("active", 8, None)
        r.workers.register(worker_id="w2", url="http://127.0.0.1:9002", kind="vllm", model="tiny")
        drained = r.workers.set_status(worker_id="w1", status="draining")
        assert drained.status == "draining"
    with db.repos() as r:
        # a restarted worker re-registers: address and shape change, the drain state stays
        again = r.workers.register(
            worker_id="w1", url="http://127.0.0.1:9011", kind="sim", model="tiny", profile="fast"
        )
        assert (again.url, again.profile, again.status) == (
            "http://127.0.0.1:9011",
            "fast",
            "draining",
        )
        with pytest.raises(AlreadyExistsError):
            r.workers.register(worker_id="w3", url="http://127.0.0.1:9002", kind="sim", model="m")
        with pytest.raises(InvalidValueError):
            r.workers.set_status(worker_id="w1", status="gone")  # type: ignore[arg-type]
        with pytest.raises(NotFoundError):
            r.workers.set_status(worker_id="w9", status="active")
    with db.reader() as r:
        assert [w.id for w in r.workers.list()] == ["w1", "w2"]
        assert [w.id for w in r.workers.list(status="active")] == ["w2"]
        assert r.workers.get(worker_id="w9") is None
    with db.repos() as r:
        assert r.workers.remove(worker_id="w2") is True
        assert r.workers.remove(worker_id="w2") is False


def test_a_model_keeps_its_image_rule(db: Database) -> None:
    rule = {"kind": "patch_merge", "patch_size": 14, "merge_size": 2, "min_pixels": 3136,
            "max_pixels": 12845056, "max_ratio": 200.0, "extra_tokens": 2}  # fmt: skip
    shape = {"name": "vl", "kind": "vlm", "hidden_size": 3584, "num_layers": 28}
    with db.repos() as r:
        assert r.models.upsert(**shape, image_tokens=rule).image_tokens == rule  # type: ignore[arg-type]
    with db.reader() as r:
        stored = r.models.get(name="vl")
        assert stored is not None and stored.image_tokens == rule
    with db.repos() as r:  # an upsert replaces the description: no rule given, none kept
        assert r.models.upsert(**shape).image_tokens is None  # type: ignore[arg-type]


def test_an_image_model_keeps_its_generation_rule(db: Database) -> None:
    rule = {"steps": 28, "sizes": ["1024x1024"], "max_images": 10}
    shape = {"name": "sd", "kind": "image", "hidden_size": 1536, "num_layers": 24}
    with db.repos() as r:
        r.models.upsert(**shape, generation=rule)  # type: ignore[arg-type]
    with db.reader() as r:
        stored = r.models.get(name="sd")
        assert stored is not None and stored.generation == rule and stored.kind == "image"
