"""Small chat models built in-process, in the styles of the chat templates users bring.

Nothing is downloaded: a byte-level BPE tokenizer is trained with ``tokenizers`` on math
text generated here, wrapped as a ``PreTrainedTokenizerFast`` with a chat template written
for these tests, and paired with a randomly initialised 2-layer Qwen2 or Llama. The result is
saved with ``save_pretrained`` so mathgym loads it through ``--model PATH`` like a hub model::

    from tests.chat_fixtures import build_chat_model
    path = build_chat_model("chatml", tmp_path / "chatml")   # -> tmp_path / "chatml"
    policy = LLMPolicy.from_pretrained(str(path), device="cpu")

Styles (:data:`STYLES`):

- ``chatml``: Qwen2.5-like. ``<|im_start|>role\\n...<|im_end|>\\n``; a default system prompt is
  injected when the chat has none; assistant ``tool_calls`` render as Hermes
  ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``. EOS is ``<|im_end|>``.
- ``chatml-base``: the same template with a Qwen-base-style tokenizer whose EOS
  ``<|endoftext|>`` differs from the end-of-turn token ``<|im_end|>``.
- ``llama3``: ``<|begin_of_text|>``, ``<|start_header_id|>role<|end_header_id|>\\n\\n...<|eot_id|>``.
- ``qwen3``: ChatML without a default system prompt; the reasoning (``...</think>``) of assistant
  turns before the last user turn is dropped, so the template is *not* prefix-preserving.
- ``gemma``: no system role (the system text is folded into the first user turn),
  ``<start_of_turn>user|model\\n...<end_of_turn>\\n``; EOS ``<eos>`` differs from ``<end_of_turn>``.
- ``mistral``: like Mistral's first instruct models: ``<s>[INST] ... [/INST]answer</s>``; it
  *raises* on a system message (and on roles that do not alternate), has no generation-prompt
  text (the model answers right after ``[/INST]``) and ends an assistant turn with EOS ``</s>``.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

STYLES = ("chatml", "chatml-base", "llama3", "qwen3", "gemma", "mistral")
Arch = Literal["qwen2", "llama"]

#: The ChatML-style templates' default system prompt (injected when a chat has none).
DEFAULT_SYSTEM = "You are a careful assistant who solves math problems."

_CHATML_TOOLS = (
    "{% if tools %}{{ '\\n\\nTools you may call:\\n<tools>' }}{% for t in tools %}{{ '\\n' + (t | tojson) }}{% endfor %}"
    "{{ '\\n</tools>\\nCall one with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.' }}{% endif %}"
)

CHATML_TEMPLATE = (
    "{% if messages and messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}"
    "{% set rest = messages[1:] %}{% else %}{% set system = '" + DEFAULT_SYSTEM + "' %}{% set rest = messages %}{% endif %}"
    "{{ '<|im_start|>system\\n' + system }}" + _CHATML_TOOLS + "{{ '<|im_end|>\\n' }}"
    "{% for m in rest %}"
    "{% if m['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' + (m['content'] or '') }}"
    "{% for call in m.get('tool_calls') or [] %}{% set f = call['function'] if 'function' in call else call %}"
    "{{ '<tool_call>{\"name\": \"' + f['name'] + '\", \"arguments\": ' + (f['arguments'] | tojson) + '}</tool_call>' }}"
    "{% endfor %}{{ '<|im_end|>\\n' }}"
    "{% elif m['role'] == 'tool' %}{{ '<|im_start|>user\\n<tool_response>\\n' + m['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

LLAMA3_TEMPLATE = (
    "{{ '<|begin_of_text|>' }}"
    "{% for m in messages %}"
    "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

QWEN3_TEMPLATE = (
    "{% set ns = namespace(last_user=-1) %}"
    "{% for m in messages %}{% if m['role'] == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}{% set content = m['content'] %}"
    "{% if m['role'] == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

GEMMA_TEMPLATE = (
    "{{ '<bos>' }}"
    "{% if messages and messages[0]['role'] == 'system' %}{% set prefix = messages[0]['content'] + '\\n\\n' %}"
    "{% set rest = messages[1:] %}{% else %}{% set prefix = '' %}{% set rest = messages %}{% endif %}"
    "{% for m in rest %}"
    "{% if m['role'] == 'system' %}{{ raise_exception('Only the first message may be a system message.') }}{% endif %}"
    "{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + m['content'] + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

MISTRAL_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}"
    "{% if m['role'] not in ('user', 'assistant') %}{{ raise_exception('Only user and assistant roles are supported.') }}{% endif %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Roles must alternate user/assistant.') }}{% endif %}"
    "{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% else %}{{ m['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)

#: DeepSeek-R1-like: the generation prompt opens the answer with ``<think>\n``, which a finished
#: assistant turn does not show (its reasoning up to ``</think>`` is dropped). Not in :data:`STYLES`:
#: its episodes differ from a re-rendering by that opening (tests/agents/test_chat_templates.py).
THINK_PROMPT_TEMPLATE = (
    "{% if messages and messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}{% set rest = messages[1:] %}"
    "{% else %}{% set rest = messages %}{% endif %}"
    "{% for m in rest %}"
    "{% if m['role'] == 'user' %}{{ '<|User|>' + m['content'] }}"
    "{% elif m['role'] == 'assistant' %}{% set c = m['content'] %}{% if '</think>' in c %}{% set c = c.split('</think>')[-1] %}{% endif %}"
    "{{ '<|Assistant|>' + c + '<|end|>' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|Assistant|><think>\\n' }}{% endif %}"
)

#: gpt-oss-like ("harmony" channels): a fixed system header; an assistant turn is written
#: ``<|start|>assistant<|channel|>final<|message|>CONTENT`` and closed by ``<|end|>`` in the history
#: but by ``<|return|>`` when it is the chat's last message (what the model emits to end its
#: answer); the generation prompt is only ``<|start|>assistant``, so the model writes the channel
#: header itself (an ``analysis`` channel first, closed by ``<|end|>``, which is no stop token;
#: a last message's ``thinking`` is written there).
#: Not in :data:`STYLES`: its episodes hold headers and channels the re-rendering leaves out.
HARMONY_TEMPLATE = (
    "{{ '<|start|>system<|message|>Reasoning: low<|end|>' }}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ '<|start|>developer<|message|>' + m['content'] + '<|end|>' }}"
    "{% elif m['role'] == 'assistant' %}"
    "{% if loop.last and not add_generation_prompt and m.get('thinking') %}{{ '<|start|>assistant<|channel|>analysis<|message|>' + m['thinking'] + '<|end|>' }}{% endif %}"
    "{{ '<|start|>assistant<|channel|>final<|message|>' + m['content'] }}"
    "{{ '<|return|>' if loop.last and not add_generation_prompt else '<|end|>' }}"
    "{% else %}{{ '<|start|>' + m['role'] + '<|message|>' + m['content'] + '<|end|>' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start|>assistant' }}{% endif %}"
)

#: Llama-2-chat-like: ``<s>[INST] <<SYS>>...<</SYS>> question [/INST] answer </s>``, a space before
#: the answer and before the EOS that closes it, no generation-prompt text. Not in :data:`STYLES`:
#: the model writes its answer's leading space itself and ends the turn with EOS, no space before.
LLAMA2_TEMPLATE = (
    "{% if messages and messages[0]['role'] == 'system' %}{% set sys = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}"
    "{% set rest = messages[1:] %}{% else %}{% set sys = '' %}{% set rest = messages %}{% endif %}"
    "{% for m in rest %}"
    "{% if m['role'] == 'user' %}{{ bos_token + '[INST] ' + (sys if loop.first else '') + m['content'] + ' [/INST]' }}"
    "{% else %}{{ ' ' + m['content'] + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)

#: style -> (template, special tokens, bos, eos, pad, generation-config EOS tokens).
_STYLE_SPECS: dict[str, dict[str, Any]] = {
    "chatml": dict(
        template=CHATML_TEMPLATE, special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], plain=["<tool_call>", "</tool_call>"],
        bos=None, eos="<|im_end|>", pad="<|endoftext|>", generation_eos=["<|im_end|>", "<|endoftext|>"],
    ),
    "chatml-base": dict(
        template=CHATML_TEMPLATE, special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], plain=["<tool_call>", "</tool_call>"],
        bos=None, eos="<|endoftext|>", pad="<|endoftext|>", generation_eos=["<|endoftext|>"],
    ),
    "llama3": dict(
        template=LLAMA3_TEMPLATE, special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        plain=[], bos="<|begin_of_text|>", eos="<|eot_id|>", pad=None, generation_eos=["<|end_of_text|>", "<|eot_id|>"],
    ),
    "qwen3": dict(
        template=QWEN3_TEMPLATE, special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], plain=["<think>", "</think>"],
        bos=None, eos="<|im_end|>", pad="<|endoftext|>", generation_eos=["<|im_end|>", "<|endoftext|>"],
    ),
    "gemma": dict(
        template=GEMMA_TEMPLATE, special=["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"], plain=[],
        bos="<bos>", eos="<eos>", pad="<pad>", generation_eos=["<eos>", "<end_of_turn>"],
    ),
    "think-prompt": dict(
        template=THINK_PROMPT_TEMPLATE, special=["<|pad|>", "<|User|>", "<|Assistant|>", "<|end|>"], plain=["<think>", "</think>"],
        bos=None, eos="<|end|>", pad="<|pad|>", generation_eos=["<|end|>"],
    ),
    "harmony": dict(
        template=HARMONY_TEMPLATE, special=["<|endoftext|>", "<|start|>", "<|message|>", "<|channel|>", "<|end|>", "<|return|>", "<|call|>"],
        plain=[], bos=None, eos="<|return|>", pad="<|endoftext|>", generation_eos=["<|return|>", "<|call|>", "<|endoftext|>"],
    ),
    "llama2": dict(
        template=LLAMA2_TEMPLATE, special=["<unk>", "<s>", "</s>"], plain=[],
        bos="<s>", eos="</s>", pad=None, generation_eos=["</s>"],
    ),
    "mistral": dict(
        template=MISTRAL_TEMPLATE, special=["<unk>", "<s>", "</s>"], plain=[],
        bos="<s>", eos="</s>", pad=None, generation_eos=["</s>"],
    ),
}


def training_text(n: int = 3000, seed: int = 0) -> list[str]:
    """Math prompts and answers (the text the tokenizer's merges are learnt from)."""
    rng = random.Random(seed)
    words = (
        "What is Solve the problem Give the final answer in \\boxed{} Guess my number higher lower "
        "the answer is so Let me compute print result You may run Python <python></python> output"
    ).split()
    lines = []
    for _ in range(n):
        a, b = rng.randint(0, 999), rng.randint(0, 99)
        op = rng.choice("+-*/")
        lines.append(f"What is {a} {op} {b}? " + " ".join(rng.choice(words) for _ in range(4)) + f" \\boxed{{{a + b}}}.")
    return lines


def build_tokenizer(style: str, vocab_size: int = 400):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with the chat template of ``style``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if style not in _STYLE_SPECS:
        raise ValueError(f"style={style!r}; choose one of {', '.join(_STYLE_SPECS)}")
    spec = _STYLE_SPECS[style]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(spec["special"]), initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(training_text(), trainer=trainer)
    core.add_tokens([AddedToken(t, normalized=False, special=False) for t in spec["plain"]])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=spec["bos"], eos_token=spec["eos"], pad_token=spec["pad"],
        additional_special_tokens=[t for t in spec["special"] if t not in {spec["bos"], spec["eos"], spec["pad"]}],
    )
    tokenizer.chat_template = spec["template"]
    return tokenizer


def build_model(tokenizer, style: str, arch: Arch = "qwen2", seed: int = 0, hidden_size: int = 32, num_layers: int = 2):
    """A randomly initialised small causal LM sized for ``tokenizer``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if arch not in ("qwen2", "llama"):
        raise ValueError(f"arch={arch!r}; choose 'qwen2' or 'llama'")
    config_cls, model_cls = (Qwen2Config, Qwen2ForCausalLM) if arch == "qwen2" else (LlamaConfig, LlamaForCausalLM)
    generation_eos = tokenizer.convert_tokens_to_ids(_STYLE_SPECS[style]["generation_eos"])
    config = config_cls(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id, eos_token_id=generation_eos,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = model_cls(config)
    model.generation_config.eos_token_id = generation_eos
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_chat_model(style: str, path: Path, arch: Arch = "qwen2", seed: int = 0) -> Path:
    """Build the ``style`` fixture (tokenizer + random ``arch`` model) and save it at ``path``.

    Reuses ``path`` when it already holds a model. Returns ``path``.
    """
    path = Path(path)
    if (path / "config.json").is_file():
        return path
    tokenizer = build_tokenizer(style)
    model = build_model(tokenizer, style, arch, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".tmp-"))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        tmp.replace(path)
    except OSError:  # built concurrently by another process
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def cached_chat_model(tmp_path_factory: Any, style: str, arch: Arch = "qwen2") -> Path:
    """``build_chat_model`` into the pytest session's base temp dir (built once per session)."""
    return build_chat_model(style, Path(tmp_path_factory.getbasetemp()) / "chat-models" / f"{style}-{arch}", arch)


#: The end-of-turn token each style's template writes after an assistant message.
END_OF_TURN = {
    "chatml": "<|im_end|>", "chatml-base": "<|im_end|>", "llama3": "<|eot_id|>", "qwen3": "<|im_end|>", "gemma": "<end_of_turn>", "mistral": "</s>",
}


def assert_episode_text(tokenizer: Any, token_ids: list[int], messages: list[dict[str, Any]], stop_ids: tuple[int, ...]) -> None:
    """Assert that an episode's tokens decode to the template's rendering of its final ``messages``.

    The episode ends right after its last action, so the rendering is cut there: the chat
    before the last assistant message with its generation prompt, the message, and the stop
    token the model sampled (if it sampled one). A stop token the model sampled that is not
    the template's end-of-turn token (EOS of a Qwen-base-style tokenizer) stays in the token
    sequence, before the end-of-turn token the template inserts; it is the one allowed difference.
    Env replies after the last action (an episode cut by the turn cap) are not in the tokens.
    """
    while messages and messages[-1]["role"] != "assistant":  # env replies after the last action (turn cap)
        messages = messages[:-1]
    decoded = tokenizer.decode(token_ids, skip_special_tokens=False)
    stops = [tokenizer.convert_ids_to_tokens(i) for i in stop_ids]
    from mathgym.agents.chat import apply_template

    body = apply_template(tokenizer, messages[:-1], tokenize=False, add_generation_prompt=True) + messages[-1]["content"]
    last = token_ids[-1] if token_ids else None
    expected = body + (tokenizer.convert_ids_to_tokens(last) if last in stop_ids else "")
    full = apply_template(tokenizer, messages, tokenize=False)
    assert full.startswith(body), "the template is not prefix-preserving on this chat"
    eot = next((t for t in stops if full.startswith(t, len(body))), None)
    if eot is not None:  # a sampled non-end-of-turn stop token directly before the template's end of turn
        for stop in stops:
            if stop != eot:
                decoded = decoded.replace(stop + eot, eot)
    assert decoded == expected, f"tokens decode to\n{decoded!r}\nthe template renders\n{expected!r}"
