"""Generation backends: how an :class:`~mathgym.agents.policy.LLMPolicy` samples.

- ``native`` (default): a short sampling loop with a KV cache, written here. On a CPU
  with the tiny model it is several times faster than ``generate`` (less per-step
  machinery), and it returns exactly the log-probs it sampled from.
- ``hf``: ``model.generate`` with ``output_scores``; works with any model generate supports.
- ``vllm``: vLLM's offline engine, when installed (GPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.nn.functional as F

from mathgym.agents.prefix import cache_tensors, gather_cache
from mathgym.errors import ConfigError, require_option

if TYPE_CHECKING:
    from mathgym.agents.policy import Generation, LLMPolicy, SamplingParams

BACKENDS = ("native", "hf", "vllm")


class GenerationBackend(Protocol):
    """Samples one completion per prompt."""

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, generator: torch.Generator | None
    ) -> list[Generation]: ...


def make_backend(name: str, policy: LLMPolicy) -> GenerationBackend:
    """Build the backend called ``name`` for ``policy``."""
    require_option("backend", name, BACKENDS)
    if name == "native":
        return NativeBackend(policy)
    if name == "hf":
        return HFGenerateBackend(policy)
    return VLLMBackend(policy)


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)``, both ``(B, T)``, left-padded."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        if p:
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p) :] = 1
    return ids.to(device), mask.to(device)


def sample_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token for each row of ``logits`` ``(B, V)``.

    Returns:
        ``(tokens, logprobs)``, both ``(B,)``; log-probs are under the temperature-scaled
        softmax (greedy: temperature 1), before top-p truncation.
    """
    logits = logits.float()
    if params.temperature <= 0:
        logp = F.log_softmax(logits, dim=-1)
        tokens = logits.argmax(-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)
    logp = F.log_softmax(logits / params.temperature, dim=-1)
    probs = logp.exp()
    if params.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        drop = (sorted_p.cumsum(-1) - sorted_p) > params.top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    device_gen = generator if generator is not None and generator.device == probs.device else None
    tokens = torch.multinomial(probs, 1, generator=device_gen).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def _finish(policy: LLMPolicy, rows: list[list[int]], lps: list[list[float]], params: SamplingParams) -> list[Generation]:
    """Cut each row at its first stop token (EOS, end of turn) or stop string and decode it."""
    from mathgym.agents.policy import Generation

    stops = set(policy.stop_token_ids)
    out = []
    for tokens, logprobs in zip(rows, lps):
        reason = "length"
        cut = next((n + 1 for n, t in enumerate(tokens) if t in stops), None)
        if cut is not None:
            tokens, logprobs, reason = tokens[:cut], logprobs[:cut], "stop"
        if params.stop:
            for n in range(1, len(tokens) + 1):
                text = policy.decode(tokens[:n])
                if any(s in text for s in params.stop):
                    tokens, logprobs, reason = tokens[:n], logprobs[:n], "stop"
                    break
        out.append(Generation(list(tokens), [float(x) for x in logprobs], policy.decode(tokens), reason))
    return out


class NativeBackend:
    """A KV-cache sampling loop: one forward over the prompts, then one token per step.

    Rows whose prompt and sampled tokens so far are identical (the G samples of a task, which
    often agree on their first tokens) are computed once: the loop keeps one cache row per
    distinct sequence and splits a row (a cache gather) when its samples diverge. Each sample
    still draws its own token from the shared distribution, so the samples and log-probs are
    those of the plain loop (``share=False``), with less compute while the samples agree.
    """

    def __init__(self, policy: LLMPolicy, share: bool = True):
        self.policy = policy
        self.share = share

    def generate(self, prompts, params, generator) -> list[Generation]:
        from transformers import DynamicCache

        policy, device = self.policy, self.policy.device
        batch = len(prompts)
        first: dict[Any, int] = {}  # distinct prompt -> its cache row
        rows, leaders = [], []  # each sample's cache row; a sample of each distinct prompt
        for i, prompt in enumerate(prompts):
            key = tuple(prompt) if self.share else i
            if key not in first:
                first[key] = len(leaders)
                leaders.append(i)
            rows.append(first[key])
        row_of = torch.tensor(rows, device=device)
        ids, mask = left_pad([list(prompts[i]) for i in leaders], policy.pad_token_id, device)
        position = (mask.cumsum(-1) - 1).clamp(min=0)
        out = policy.model(input_ids=ids, attention_mask=mask, position_ids=position, past_key_values=DynamicCache(), use_cache=True)
        logits, cache = out.logits[:, -1, :], out.past_key_values
        if self.share and cache_tensors(cache) is None:  # a cache layout this loop cannot split
            return NativeBackend(policy, share=False).generate(prompts, params, generator)
        width = mask.shape[1]
        full_mask = torch.ones((len(leaders), width + params.max_new_tokens), dtype=mask.dtype, device=device)
        full_mask[:, :width] = mask
        next_pos = position[:, -1:] + 1
        tokens_out = torch.zeros((batch, params.max_new_tokens), dtype=torch.long, device=device)
        logps_out = torch.zeros((batch, params.max_new_tokens), device=device)
        done = torch.zeros(batch, dtype=torch.bool, device=device)
        stops = torch.tensor(policy.stop_token_ids, dtype=torch.long, device=device)
        vocab = logits.shape[-1]
        steps = 0
        for step in range(params.max_new_tokens):
            token, logp = sample_token(logits.index_select(0, row_of), params, generator)
            token = token.masked_fill(done, policy.pad_token_id)
            tokens_out[:, step], logps_out[:, step] = token, logp.masked_fill(done, 0.0)
            done |= torch.isin(token, stops)
            steps = step + 1
            if bool(done.all()) or steps == params.max_new_tokens:
                break
            # One cache row per distinct (row so far, new token); split rows whose samples diverged.
            pair = row_of * vocab + token
            distinct, row_of = torch.unique(pair, return_inverse=True)
            parent = torch.div(distinct, vocab, rounding_mode="floor")
            if len(distinct) != full_mask.shape[0] or not bool((parent == torch.arange(len(parent), device=device)).all()):
                gather_cache(cache, parent)
                full_mask, next_pos = full_mask.index_select(0, parent), next_pos.index_select(0, parent)
            out = policy.model(
                input_ids=(distinct % vocab)[:, None], attention_mask=full_mask[:, : width + step + 1],
                position_ids=next_pos, past_key_values=cache, use_cache=True,
            )
            logits, cache = out.logits[:, -1, :], out.past_key_values
            next_pos = next_pos + 1
        rows = tokens_out[:, :steps].tolist()
        lps = logps_out[:, :steps].tolist()
        return _finish(policy, rows, lps, params)


class HFGenerateBackend:
    """``model.generate`` with scores; log-probs recomputed from the returned logits."""

    def __init__(self, policy: LLMPolicy):
        self.policy = policy

    def generate(self, prompts, params, generator) -> list[Generation]:
        policy = self.policy
        ids, mask = left_pad(prompts, policy.pad_token_id, policy.device)
        greedy = params.temperature <= 0
        kwargs: dict[str, Any] = {"do_sample": not greedy, "max_new_tokens": params.max_new_tokens}
        if not greedy:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        if generator is not None and not greedy:
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
        out = policy.model.generate(
            input_ids=ids, attention_mask=mask, output_logits=True, return_dict_in_generate=True,
            pad_token_id=policy.pad_token_id, eos_token_id=list(policy.stop_token_ids), **kwargs,
        )
        new = out.sequences[:, ids.shape[1] :]
        logits = torch.stack(out.logits, dim=1).float()  # (B, N, V)
        scale = 1.0 if greedy else params.temperature
        logp = F.log_softmax(logits / scale, dim=-1).gather(-1, new[..., None]).squeeze(-1)
        return _finish(policy, new.tolist(), logp.tolist(), params)


class VLLMBackend:
    """vLLM offline engine (GPU); the weights are synced from the policy on each call."""

    def __init__(self, policy: LLMPolicy):
        try:
            import vllm  # noqa: F401
        except ImportError as err:
            raise ConfigError("backend='vllm' needs vLLM: pip install vllm (GPU only).") from err
        from vllm import LLM

        self.policy = policy
        self.engine = LLM(model=policy.name_or_path, dtype="auto", enable_prefix_caching=True)

    def _sync_weights(self) -> None:
        model = self.policy.model
        runner = self.engine.llm_engine.model_executor.driver_worker.model_runner.model
        if self.policy.has_lora:  # merge the adapter in, copy, and take it out again
            model.merge_adapter()
            state = {k.replace("base_model.model.", "").replace(".base_layer", ""): v
                     for k, v in model.state_dict().items() if "lora_" not in k}
            runner.load_weights(state.items())
            model.unmerge_adapter()
        else:
            runner.load_weights(model.state_dict().items())

    def generate(self, prompts, params, generator) -> list[Generation]:
        from vllm import SamplingParams as VSampling
        from vllm.inputs import TokensPrompt

        from mathgym.agents.policy import Generation

        self._sync_weights()
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator)) if generator is not None else None
        sampling = VSampling(
            temperature=max(params.temperature, 0.0), top_p=params.top_p, max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None, stop_token_ids=list(self.policy.stop_token_ids), logprobs=0, seed=seed,
        )
        results = self.engine.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], sampling, use_tqdm=False)
        out = []
        for result in results:
            comp = result.outputs[0]
            lps = [next(iter(d.values())).logprob if d else 0.0 for d in (comp.logprobs or [])]
            reason = "length" if comp.finish_reason == "length" else "stop"
            out.append(Generation(list(comp.token_ids), lps, comp.text, reason))
        return out
