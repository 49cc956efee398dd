"""The subset of OpenAI's request bodies Arbiter validates; everything else is forwarded as is."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = None
    continuous_usage_stats: bool | None = None


class _Common(BaseModel):
    """Fields shared by chat and text completions. Unknown fields are kept and forwarded."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    n: int = Field(default=1, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stop: str | list[str] | None = None
    metadata: dict[str, Any] | None = None
    user: str | None = None
    min_tokens: int | None = Field(default=None, ge=0)
    ignore_eos: bool | None = None

    @field_validator("n")
    @classmethod
    def _only_one_choice(cls, value: int) -> int:
        if value != 1:
            raise ValueError("only n=1 is supported")
        return value


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "tool", "developer", "function"]
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(_Common):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] | list[list[int]]

    @field_validator("prompt")
    @classmethod
    def _single_prompt(cls, value: Any) -> Any:
        nested = isinstance(value, list) and value and isinstance(value[0], (str, list))
        if nested and len(value) != 1:
            raise ValueError("only one prompt per request is supported")
        if isinstance(value, list) and not value:
            raise ValueError("prompt must not be empty")
        return value

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens
