"""The rule tagger: cues decide, the cost is bounded by the window, chat bodies are read."""

from __future__ import annotations

from control_plane.perception.tagger import HEAD, TAIL, prompt_text, scores, tag
from control_plane.perception.tasks import TASK_TYPES


def test_clear_cues_decide() -> None:
    cases = {
        "Translate this paragraph into Spanish, please": "Translation",
        "```python\nprint(1/0)\n``` why does this crash?": "CodeGeneration",
        "What year did the Berlin Wall fall?": "QA",
        "hey! how are you doing today": "Dialogue",
        "Draft an email to my landlord about the broken heater": "LetterDrafting",
        "If 3 pencils cost 45 cents, how much do 7 cost?": "MathReasoning",
        "Write a persuasive essay on school uniforms": "EssayGeneration",
        "Extract every date and amount from the invoice below as JSON": "Extraction",
        "Rephrase this sentence so it sounds friendlier": "Paraphrasing",
        "tl;dr of the thread below": "Summarization",
    }
    for prompt, expected in cases.items():
        assert tag(prompt) == expected, (prompt, scores(prompt))


def test_no_cue_falls_back_and_every_answer_is_a_table_6_type() -> None:
    assert tag("Paris?") == "QA"
    assert tag("capital of peru") == "QA"  # a few words and no cue: a lookup
    assert tag("zzz qqq www eee rrr ttt yyy uuu iii") == "Dialogue"
    assert all(tag(p) in TASK_TYPES for p in ("", "?", "1 + 1", "x" * 10_000))


def test_only_the_head_and_tail_are_read() -> None:
    middle = " summarize" * 5000
    prompt = "Translate into French:" + " " * HEAD + middle + " " * TAIL + "merci."
    assert "Summarization" not in scores(prompt)
    assert tag(prompt) == "Translation"


def test_the_text_of_completions_and_chats() -> None:
    assert prompt_text({"prompt": "hello"}) == "hello"
    assert prompt_text({"prompt": ["a", "b"]}) == "a\nb"
    assert prompt_text({"prompt": [1, 2]}) == ""
    chat = {
        "messages": [
            {"role": "system", "content": "You translate."},
            {"role": "user", "content": [{"type": "text", "text": "summarize"}]},
            {"role": "user", "content": "this"},
        ]
    }
    assert prompt_text(chat) == "\nsummarize\nthis"
