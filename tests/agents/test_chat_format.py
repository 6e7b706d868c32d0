"""``ChatFormat`` writes the token ids the policy wrote before the formatting moved out of it.

``tests/data/chat_format_ids.json`` holds the ids that ``LLMPolicy``'s own template methods gave
(commit caab17b, before :mod:`mathgym.agents.chat_format` existed) on every fixture template of
:mod:`tests.chat_fixtures`: prompts, the env's turn after an action (closed by its end of turn, by
another stop token, cut by the length cap), demonstrated answers, actions read back, SFT and DPO
encodings, OpenRLHF's env feedback, and rollouts of a scripted policy on a single-turn and a
multi-turn env (the collector's own prompts, actions and env turns). The same ids must come out
now. The fixture tokenizers are trained here: where this machine's ``tokenizers`` trains another
vocabulary, the recorded ids do not apply and the test says so (skip).

To record again after a deliberate change of the format: ``python -m tests.agents.test_chat_format RECORD``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy  # noqa: E402
from mathgym.agents.sampling import Generation, SamplingParams  # noqa: E402
from mathgym.algos.preferences import PreferencePair, pair_episodes  # noqa: E402
from mathgym.algos.rollout import RolloutCollector, RolloutSettings  # noqa: E402
from mathgym.algos.sft import encode_demonstration  # noqa: E402
from mathgym.integrations.openrlhf import env_reply_text  # noqa: E402
from tests.chat_fixtures import build_chat_model  # noqa: E402

GOLDEN = Path(__file__).parents[1] / "data" / "chat_format_ids.json"
ARCH = {"chatml": "qwen2", "chatml-base": "qwen2", "llama3": "llama", "qwen3": "qwen2", "gemma": "llama", "mistral": "llama",
        "harmony": "llama", "llama2": "llama", "think-prompt": "llama"}
ASK = [{"role": "user", "content": "Guess a number."}]
DEMOS = [
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Guess."}, {"role": "assistant", "content": "50"},
     {"role": "user", "content": "higher"}, {"role": "assistant", "content": "75"}],
    [{"role": "user", "content": "Guess."}, {"role": "assistant", "content": "<think>\nhm\n</think>\n\n5"}],
    [{"role": "user", "content": "Guess."}, {"role": "assistant", "content": "5", "reasoning_content": "hm"}],
]
#: The scripted policy's actions, turn by turn: ``(text, closed)``; a closed one ends with the end of
#: turn, the others were cut by the length cap (no stop token).
SCRIPT = [("50", True), ("<|channel|>final<|message|>75", False), ("62", True)]


class ScriptedPolicy(LLMPolicy):
    """Acts from :data:`SCRIPT` (no sampling), so that a rollout's ids are the format's alone."""

    end_of_turn: int = 0
    turn: int = 0

    def generate(self, prompts, params, generator=None, seeds=None):
        text, closed = SCRIPT[self.turn % len(SCRIPT)]
        self.turn += 1
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + ([self.end_of_turn] if closed else [])
        return [Generation(ids, [0.0] * len(ids), text, "stop" if closed else "length") for _ in prompts]


def _episode(ep: Any) -> dict[str, Any]:
    return {"ids": list(ep.token_ids), "mask": list(ep.action_mask), "completions": list(ep.completions)}


def _rollout(policy: ScriptedPolicy, env_id: str, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    policy.turn = 0
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=8), max_turns=3, max_episode_tokens=600)
    collector = RolloutCollector(env_id, kwargs, policy, num_tasks=1, settings=settings)
    try:
        return [_episode(e) for e in collector.collect_episodes([3])]
    finally:
        collector.close()


def format_ids(chat: Any, policy: ScriptedPolicy, path: Path) -> dict[str, Any]:
    """Everything the chat format ``chat`` writes for the model at ``path`` (``policy`` acts from the script)."""
    eot = chat.end_of_turn_id
    policy.end_of_turn = eot
    out: dict[str, Any] = {
        "end_of_turn": eot, "stops": list(chat.stop_token_ids), "answer_opening": chat.answer_opening,
        "message_close": chat.message_close_id, "prompt": chat.prompt_ids(ASK),
        "answer": chat.answer_ids(ASK, "5"),
        "answer_reasoning": chat.answer_ids(ASK, {"role": "assistant", "content": "5", "reasoning_content": "think"}),
        "action_text": chat.action_text(chat.encode("<|channel|>analysis<|message|>3<|end|><|channel|>final<|message|>5") + [eot]),
        "openrlhf": env_reply_text(str(path), ASK, "5", "higher"),
    }
    for name, last in (("eot", eot), ("cut", None), ("eos", chat.tokenizer.eos_token_id), ("plain", chat.encode("5")[-1])):
        out[f"env_turn_{name}"] = chat.env_turn_ids(ASK, "higher", last)
    out["demos"] = [_episode(encode_demonstration(chat, demo)) for demo in DEMOS]
    out["pairs"] = [[_episode(e) for e in pair_episodes(chat, PreferencePair(prompt, "5", "7"), 0)]
                    for prompt in (tuple(ASK), "plain prompt")]
    out["rollout_single"] = _rollout(policy, "MathReason-v0", {"system_prompt": ""})
    out["rollout_multi"] = _rollout(policy, "GuessNumber-v0", {})
    return out


def vocabulary(tokenizer: Any) -> str:
    """A fingerprint of the tokenizer's vocabulary (the recorded ids hold for this one only)."""
    return hashlib.sha256(json.dumps(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()[:16]


def scripted(path: Path) -> ScriptedPolicy:
    base = LLMPolicy.from_pretrained(str(path), device="cpu", dtype="float32")
    return ScriptedPolicy(model=base.model, tokenizer=base.tokenizer, device=base.device, name_or_path=base.name_or_path)


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("style", list(ARCH))
def test_the_chat_format_writes_the_ids_the_policy_wrote(golden, style, tmp_path_factory):
    path = build_chat_model(style, Path(tmp_path_factory.getbasetemp()) / "chat-models" / f"{style}-{ARCH[style]}", ARCH[style])
    policy = scripted(path)
    recorded = golden[style]
    if vocabulary(policy.tokenizer) != recorded["vocabulary"]:
        pytest.skip(f"this machine's tokenizers trains another {style} vocabulary: the recorded ids do not apply")
    now = format_ids(policy.chat, policy, path)
    for key, value in now.items():
        assert value == recorded[key], f"{style}: {key} changed"


def test_a_policy_holds_its_chat_format_and_openrlhf_needs_no_model(tmp_path_factory):
    """The policy samples; the format is its tokenizer's, with the template variables it was loaded with."""
    from mathgym.agents.chat_format import ChatFormat

    path = build_chat_model("chatml", Path(tmp_path_factory.getbasetemp()) / "chat-models" / "chatml-qwen2", "qwen2")
    policy = LLMPolicy.from_pretrained(str(path), device="cpu", dtype="float32", chat_template_kwargs={"enable_thinking": False})
    assert isinstance(policy.chat, ChatFormat) and policy.chat.tokenizer is policy.tokenizer
    assert policy.chat.template_kwargs == {"enable_thinking": False}
    assert not hasattr(policy, "encode_chat") and not hasattr(policy, "render_chat")
    standalone = ChatFormat.from_pretrained(path)
    assert standalone.prompt_ids(ASK) == policy.chat.prompt_ids(ASK)
    assert standalone.stop_token_ids == (standalone.eos_token_id,)  # no model: no generation config beside the template's


def record() -> None:
    """Write :data:`GOLDEN` from the chat format of this checkout (a deliberate change of the format)."""
    import tempfile

    out = {}
    root = Path(tempfile.mkdtemp())
    for style, arch in ARCH.items():
        path = build_chat_model(style, root / f"{style}-{arch}", arch)
        policy = scripted(path)
        out[style] = {"vocabulary": vocabulary(policy.tokenizer), **format_ids(policy.chat, policy, path)}
    GOLDEN.write_text(json.dumps(out, sort_keys=True) + "\n")


if __name__ == "__main__" and sys.argv[1:] == ["RECORD"]:
    record()
