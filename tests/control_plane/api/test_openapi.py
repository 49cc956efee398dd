"""The OpenAPI document names every answer a route can give, with honest content types."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.api.app import create_app
from control_plane.settings import Settings


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    app = create_app(Settings(admin_token="t"))
    document: dict[str, Any] = app.openapi()
    return document


def _responses(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    responses: dict[str, Any] = spec["paths"][path][method]["responses"]
    return responses


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_completions_document_every_error_and_streaming(spec: dict[str, Any], path: str) -> None:
    responses = _responses(spec, "post", path)
    for code in ("400", "401", "404", "413", "429", "502", "503", "504"):
        schema = responses[code]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Error"}, code
    assert "422" not in responses  # a bad field is a 400, as OpenAI and vLLM answer it
    assert set(responses["200"]["content"]) == {"application/json", "text/event-stream"}
    headers = {p["name"] for p in spec["paths"][path]["post"]["parameters"]}
    assert {"X-Arbiter-Priority", "X-Arbiter-SLO-TTFT-Ms", "X-Arbiter-App"} <= headers


def test_metrics_is_prometheus_text(spec: dict[str, Any]) -> None:
    assert set(_responses(spec, "get", "/metrics")["200"]["content"]) == {
        "text/plain; version=0.0.4"
    }


def test_every_route_documents_its_errors(spec: dict[str, Any]) -> None:
    for path, item in spec["paths"].items():
        for method, op in item.items():
            codes = set(op["responses"])
            assert {"413", "500"} <= codes, (method, path)
            if path.startswith(("/v1/", "/admin")):
                assert {"401", "429", "503"} <= codes, (method, path)
                assert op["security"] == [{"bearer": []}]
            if path.startswith("/v1/"):
                assert "400" in codes and "422" not in codes, (method, path)
            if path.startswith("/admin"):
                ref = op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/AdminError"), (method, path)
    assert "HTTPValidationError" not in str(spec)


def test_error_schema_is_openai_shape(spec: dict[str, Any]) -> None:
    error = spec["components"]["schemas"]["Error"]
    assert error["required"] == ["error"]
    assert set(error["properties"]["error"]["properties"]) == {"message", "type", "param", "code"}
    admin = spec["components"]["schemas"]["AdminError"]
    assert admin["properties"]["errors"]["items"]["required"] == ["param", "message"]
