"""The model registry: upsert, list, delete, audited."""

from __future__ import annotations

from tests.control_plane.api.admin.conftest import AdminApi


async def test_model_registry(api: AdminApi) -> None:
    spec = {"kind": "vlm", "hidden_size": 4096, "num_layers": 32, "max_model_len": 8192}
    resp = await api.client.put("/admin/models/llava", json={**spec, "reason": "new model"})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        **spec, "name": "llava", "unified_cost_factor": None, "image_tokens": None,
        "generation": None,
    }  # fmt: skip
    resp = await api.client.put(
        "/admin/models/llava", json={**spec, "unified_cost_factor": 1.5, "reason": "measured"}
    )
    assert resp.json()["unified_cost_factor"] == 1.5
    assert [m["name"] for m in (await api.client.get("/admin/models")).json()["data"]] == ["llava"]
    bad = await api.client.put("/admin/models/llava", json={**spec, "kind": "smell", "reason": "r"})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "kind"
    zero = await api.client.put("/admin/models/x", json={**spec, "hidden_size": 0, "reason": "r"})
    assert zero.status_code == 422 and zero.json()["error"]["param"] == "hidden_size"
    assert (
        await api.client.delete("/admin/models/llava", params={"reason": "r"})
    ).status_code == 200
    assert (
        await api.client.delete("/admin/models/llava", params={"reason": "r"})
    ).status_code == 404
    actions = [a["action"] for a in (await api.client.get("/admin/audit")).json()["data"]]
    assert actions == ["model.delete", "model.upsert", "model.upsert"]


async def test_a_vlm_declares_its_image_rule_and_a_bad_rule_names_its_field(api: AdminApi) -> None:
    spec = {"kind": "vlm", "hidden_size": 3584, "num_layers": 28, "reason": "qwen2-vl"}
    rule = {"kind": "patch_merge", "min_pixels": 3136, "max_pixels": 1003520}
    resp = await api.client.put("/admin/models/vl", json={**spec, "image_tokens": rule})
    assert resp.status_code == 200, resp.text
    stored = resp.json()["image_tokens"]
    assert stored["kind"] == "patch_merge" and stored["max_pixels"] == 1003520
    assert stored["patch_size"] == 14 and stored["extra_tokens"] == 2  # defaults filled in
    bad = await api.client.put(
        "/admin/models/vl", json={**spec, "image_tokens": {"kind": "fixed", "tokens": 0}}
    )
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "image_tokens.tokens"
    typo = await api.client.put("/admin/models/vl", json={**spec, "image_tokens": {"pixels": 1}})
    assert typo.status_code == 422 and "image_tokens" in typo.json()["error"]["param"]


async def test_an_image_model_declares_its_generation_rule(api: AdminApi) -> None:
    spec = {"kind": "image", "hidden_size": 1536, "num_layers": 24, "reason": "sd3"}
    rule = {"steps": 30, "sizes": ["1024x1024", "768x768"]}
    resp = await api.client.put("/admin/models/sd", json={**spec, "generation": rule})
    assert resp.status_code == 200, resp.text
    assert resp.json()["generation"] == {**rule, "max_images": 10}
    bad = await api.client.put("/admin/models/sd", json={**spec, "generation": {"sizes": ["x"]}})
    assert bad.status_code == 422 and "generation" in bad.json()["error"]["param"]
