"""The subset of OpenAI's request bodies Arbiter validates; everything else is forwarded as is.

Types are strict where OpenAI's API refuses a mismatch (`"stream": "yes"`, `"max_tokens": "5"`
or `1e30` are errors, not coerced), and every number is bounded (`control_plane.gateway.bounds`), so
nothing that passes here can overflow a counter or a SQL column later.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from control_plane.gateway.bounds import INT32_MAX

Count = Annotated[StrictInt, Field(ge=1, le=INT32_MAX)]
TokenId = Annotated[StrictInt, Field(ge=0, le=INT32_MAX)]
Fraction = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool | None = None
    continuous_usage_stats: StrictBool | None = None


REFUSED: dict[str, str] = {
    "prompt_embeds": (
        "prompt_embeds is not accepted here: the gateway cannot count or check embeddings (a "
        "tensor the worker would deserialize); send the prompt as text or token ids"
    ),
    "mm_processor_kwargs": (
        "mm_processor_kwargs is not accepted here: an image is priced and checked against the "
        "context by the model's image rule, which a client's processor settings would change"
    ),
}
"""vLLM fields a tenant may not set, and why (each a 400 naming it; null is ignored)."""


class _Common(BaseModel):
    """Fields shared by chat and text completions. Unknown fields are kept and forwarded, but
    for those in `REFUSED`."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr = Field(min_length=1, max_length=256, examples=["tiny-llama"])
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    max_tokens: Count | None = None
    n: StrictInt = Field(default=1, ge=1, le=1, description="only n=1 is supported")
    temperature: Annotated[Fraction, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Fraction, Field(gt=0, le=1)] | None = None
    stop: StrictStr | list[StrictStr] | None = None
    metadata: dict[str, Any] | None = None
    user: StrictStr | None = None
    min_tokens: Annotated[StrictInt, Field(ge=0, le=INT32_MAX)] | None = None
    ignore_eos: StrictBool | None = None

    prompt_embeds: Any = Field(default=None, description=REFUSED["prompt_embeds"])
    mm_processor_kwargs: Any = Field(default=None, description=REFUSED["mm_processor_kwargs"])

    @field_validator("prompt_embeds", "mm_processor_kwargs", mode="before")
    @classmethod
    def _refused(cls, value: Any, info: ValidationInfo) -> None:
        """Runs only when the field is sent: nothing for a request without it."""
        if value is not None:
            raise ValueError(REFUSED[str(info.field_name)])


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "tool", "developer", "function"]
    content: StrictStr | list[dict[str, Any]] | None = None


class ChatCompletionRequest(_Common):
    messages: list[ChatMessage] = Field(
        min_length=1, examples=[[{"role": "user", "content": "2+2?"}]]
    )
    max_completion_tokens: Count | None = None

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


Prompt = (
    StrictStr
    | Annotated[list[StrictStr], Field(min_length=1, max_length=1)]
    | Annotated[list[TokenId], Field(min_length=1)]
    | Annotated[
        list[Annotated[list[TokenId], Field(min_length=1)]], Field(min_length=1, max_length=1)
    ]
)
_PROMPT_RULE = (
    "prompt must be a string, a list of one string, a non-empty list of token ids "
    f"(integers 0..{INT32_MAX}) or a list of one such list (one prompt per request)"
)


class CompletionRequest(_Common):
    prompt: Prompt = Field(examples=["Once upon a time"])

    @field_validator("prompt", mode="wrap")
    @classmethod
    def _one_prompt(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise ValueError(_PROMPT_RULE) from None

    def requested_max_tokens(self) -> int | None:
        return self.max_tokens
