"""Generation backends: how an :class:`~mathgym.agents.policy.LLMPolicy` samples.

- ``native`` (default): a short sampling loop with a KV cache, written here. On a CPU
  with the tiny model it is several times faster than ``generate`` (less per-step
  machinery), and it returns exactly the log-probs it sampled from.
- ``hf``: ``model.generate`` with ``output_scores``; works with any model generate supports.
- ``vllm``: vLLM's offline engine, when installed (GPU); the policy's weights are pushed
  into it after each update (:class:`WeightSync`, :func:`vllm_weights`).

Randomness: ``generate(prompts, params, generator, seeds)`` takes one seed per prompt
(``seeds``), or draws them from ``generator`` (the global RNG when ``None``). The ``native``
and ``vllm`` backends draw each prompt's completion from its own stream: a prompt's sample
depends on its seed alone, not on the other prompts of the batch nor their number (so that
rollouts split over data-parallel ranks are those of one process). ``hf`` seeds one stream
for the whole batch from the prompts' seeds: the same batch gives the same samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F

from mathgym.agents.choices import Backend
from mathgym.agents.fast.lean_decode import LeanCache, lean_step
from mathgym.agents.fast.turn_cache import TurnCache, cache_from_tensors
from mathgym.agents.kv_cache import cache_tensors, gather_cache, returned_cache, with_cache
from mathgym.agents.sampling import Generation, SamplingParams, SamplingPolicy, left_pad
from mathgym.errors import ConfigError
from mathgym.options import pick


class GenerationBackend(Protocol):
    """Samples one completion per prompt."""

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, generator: torch.Generator | None,
        seeds: Sequence[int] | None = None,
    ) -> list[Generation]: ...


def make_backend(name: Backend, policy: SamplingPolicy) -> GenerationBackend:
    """Build the backend called ``name`` for ``policy`` (:data:`BACKENDS`)."""
    return pick(BACKENDS, "backend", name)(policy)


_SEED_BITS = 2**63 - 1


def row_seeds(count: int, generator: torch.Generator | None, seeds: Sequence[int] | None = None) -> list[int]:
    """The seed of each of ``count`` prompts' streams: ``seeds`` when given, else drawn from
    ``generator`` (the global RNG when ``None``)."""
    if seeds is not None:
        if len(seeds) != count:
            raise ValueError(f"generate() needs one seed per prompt: {count} prompts, {len(seeds)} seeds")
        return [int(s) & _SEED_BITS for s in seeds]
    return torch.randint(0, _SEED_BITS, (count,), generator=generator).tolist()


def row_uniforms(seeds: Sequence[int], length: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """``(B, length)`` float64 uniforms in [0, 1): row ``i`` holds the first ``length`` draws of
    the stream seeded by ``seeds[i]`` (a longer draw extends a shorter one, so a row's first
    tokens do not depend on how many tokens the batch asks for).

    Example:
        >>> a, b = row_uniforms([7, 8], 3), row_uniforms([8], 5)
        >>> bool((a[1] == b[0, :3]).all())
        True
    """
    rows = [np.random.default_rng(int(s)).random(length) for s in seeds]
    return torch.from_numpy(np.stack(rows) if rows else np.zeros((0, length))).to(device)


def sample_token(
    logits: torch.Tensor, params: SamplingParams, uniforms: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token for each row of ``logits`` ``(B, V)``.

    Sampling inverts each row's cumulative distribution at that row's uniform draw
    (``uniforms``, ``(B,)``; fresh global-RNG draws when ``None``): the token depends on the
    row's own distribution and draw only, and a small float difference in the logits changes
    it only when the draw lies within that difference of a boundary between two tokens.

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
    cdf = probs.to(torch.float32 if probs.device.type == "mps" else torch.float64).cumsum(-1)  # (B, V)
    draw = torch.rand(len(cdf), dtype=cdf.dtype, device=cdf.device) if uniforms is None else uniforms.to(cdf)
    tokens = torch.searchsorted(cdf, (draw * cdf[:, -1])[:, None].contiguous(), right=True).squeeze(-1)
    tokens = tokens.clamp_(max=probs.shape[-1] - 1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def _finish(policy: SamplingPolicy, rows: list[list[int]], lps: list[list[float]], params: SamplingParams) -> list[Generation]:
    """Cut each row at its first stop token (EOS, end of turn) or stop string and decode it."""
    stops = set(policy.chat.stop_token_ids)
    out = []
    for tokens, logprobs in zip(rows, lps):
        reason = "length"
        cut = next((n + 1 for n, t in enumerate(tokens) if t in stops), None)
        if cut is not None:
            tokens, logprobs, reason = tokens[:cut], logprobs[:cut], "stop"
        if params.stop:
            for n in range(1, len(tokens) + 1):
                text = policy.chat.decode(tokens[:n])
                if any(s in text for s in params.stop):
                    tokens, logprobs, reason = tokens[:n], logprobs[:n], "stop"
                    break
        out.append(Generation(list(tokens), [float(x) for x in logprobs], policy.chat.decode(tokens), reason))
    return out


class NativeBackend:
    """A KV-cache sampling loop: one forward over the prompts, then one token per step.

    Rows whose prompt and sampled tokens so far are identical (the G samples of a task, which
    often agree on their first tokens) are computed once: the prompt of a group runs once, and
    the loop keeps one cache row per distinct sequence and splits a row (a cache gather) when its
    samples diverge. A sample that emitted a stop token leaves the batch (its cache row is dropped
    once no other sample continues it), and the loop ends when every sample has stopped. Each
    sample still draws its own token from the shared distribution, so the samples and log-probs
    are those of the plain loop (``share=False``), with less compute.

    The prefill is the model's forward; for a model with Llama's layout each decoding step is a
    :class:`~mathgym.agents.fast.lean_decode.LeanStep` (the same modules, without the framework's
    per-layer work), checked once against the model's own logits.

    Inside :meth:`~mathgym.agents.policy.LLMPolicy.reusing_turns` (:attr:`turns` set), the
    key/value rows of every sequence a call ran are kept, and the next call runs each prompt
    from the end of its longest kept prefix (:mod:`mathgym.agents.fast.turn_cache`): a multi-turn
    episode's turn runs its new tokens only, not the whole episode again.
    """

    def __init__(self, policy: SamplingPolicy, share: bool = True):
        self.policy = policy
        self.share = share
        self.turns: TurnCache | None = None

    def generate(self, prompts, params, generator, seeds=None) -> list[Generation]:
        from transformers import DynamicCache

        policy, device = self.policy, self.policy.device
        batch = len(prompts)
        if params.temperature > 0:
            seeds = row_seeds(batch, generator, seeds)  # drawn once: the fallback below samples the same streams
        noise = row_uniforms(seeds, params.max_new_tokens, device) if params.temperature > 0 else None
        first: dict[Any, int] = {}  # distinct prompt -> its cache row
        rows, leaders = [], []  # each sample's cache row; a sample of each distinct prompt
        for i, prompt in enumerate(prompts):
            key = tuple(prompt) if self.share else i
            if key not in first:
                first[key] = len(leaders)
                leaders.append(i)
            rows.append(first[key])
        row_of = torch.tensor(rows, device=device)
        leading = [list(prompts[i]) for i in leaders]
        plan = None if self.turns is None else self.turns.plan(leading, policy.pad_token_id, device)
        if plan is None:
            ids, mask = left_pad(leading, policy.pad_token_id, device)
            position, cache = (mask.cumsum(-1) - 1).clamp(min=0), DynamicCache()
        else:
            ids, mask, position, cache = plan.input_ids, plan.attention_mask, plan.position_ids, cache_from_tensors(plan.past)
        if self.turns is not None:
            self.turns.reused_tokens += 0 if plan is None else plan.reused
            self.turns.run_tokens += int((mask[:, -ids.shape[1]:] > 0).sum())
        out = policy.model(input_ids=ids, attention_mask=mask, position_ids=position, **with_cache(policy.model, cache), use_cache=True)
        logits, cache = out.logits[:, -1, :], returned_cache(out)
        if self.share and cache_tensors(cache) is None:  # a cache layout this loop cannot split
            return NativeBackend(policy, share=False).generate(prompts, params, generator, seeds)
        lean = lean_step(policy.model) if cache_tensors(cache) is not None else None
        if lean is not None:  # the decoding steps write into buffers, without the framework's per-layer work
            cache, joined = LeanCache(cache, params.max_new_tokens), lean.joined_weights()
        width = mask.shape[1]
        full_mask = torch.ones((len(leaders), width + params.max_new_tokens), dtype=mask.dtype, device=device)
        full_mask[:, :width] = mask
        next_pos = position[:, -1:] + 1
        tokens_out = torch.full((batch, params.max_new_tokens), policy.pad_token_id, dtype=torch.long, device=device)
        logps_out = torch.zeros((batch, params.max_new_tokens), device=device)
        active = torch.arange(batch, device=device)  # the samples still generating; row_of holds their cache rows
        stops = torch.tensor(policy.chat.stop_token_ids, dtype=torch.long, device=device)
        vocab = logits.shape[-1]
        steps = 0
        for step in range(params.max_new_tokens):
            draws = None if noise is None else noise[active, step]
            token, logp = sample_token(logits.index_select(0, row_of), params, draws)
            tokens_out[active, step], logps_out[active, step] = token, logp
            steps = step + 1
            going = ~torch.isin(token, stops)
            if steps == params.max_new_tokens or not bool(going.any()):
                self._keep(prompts, tokens_out, active, row_of, cache, full_mask[:, : width + step], step)
                break
            if not bool(going.all()):  # finished samples leave the batch: they cost no more compute
                self._keep(prompts, tokens_out, active[~going], row_of[~going], cache, full_mask[:, : width + step], step)
                active, token, row_of = active[going], token[going], row_of[going]
            # One cache row per distinct (row so far, new token) of the samples still going: split rows whose
            # samples diverged, drop rows none of them continues.
            pair = row_of * vocab + token
            distinct, row_of = torch.unique(pair, return_inverse=True)
            parent = torch.div(distinct, vocab, rounding_mode="floor")
            if len(distinct) != full_mask.shape[0] or not bool((parent == torch.arange(len(parent), device=device)).all()):
                if lean is not None:
                    cache.gather(parent)
                else:
                    gather_cache(cache, parent)
                full_mask, next_pos = full_mask.index_select(0, parent), next_pos.index_select(0, parent)
            if lean is not None:
                logits = lean((distinct % vocab)[:, None], next_pos, full_mask[:, : width + step + 1], cache, joined)
            else:
                out = policy.model(
                    input_ids=(distinct % vocab)[:, None], attention_mask=full_mask[:, : width + step + 1],
                    position_ids=next_pos, **with_cache(policy.model, cache), use_cache=True,
                )
                logits, cache = out.logits[:, -1, :], returned_cache(out)
            next_pos = next_pos + 1
        if self.turns is not None:
            self.turns.turn_over()
        rows = tokens_out[:, :steps].tolist()
        lps = logps_out[:, :steps].tolist()
        return _finish(policy, rows, lps, params)

    def _keep(self, prompts, tokens_out, samples, cache_rows, cache, mask, fed) -> None:
        """Hand :attr:`turns` the cache rows of ``samples`` that end here: each one's prompt and
        its first ``fed`` sampled tokens (the ones the cache has run), ``mask`` the rows' columns."""
        tensors = None if self.turns is None else cache_tensors(cache)
        if tensors is None:
            return
        distinct, inverse = torch.unique(cache_rows, return_inverse=True)
        kept = [getattr(holder, name).index_select(0, distinct) for holder, name in tensors]  # a copy: the loop drops its rows
        starts = mask.index_select(0, distinct).argmax(-1).tolist()  # the first real column (padding is on the left)
        for sample, r, tokens in zip(samples.tolist(), inverse.tolist(), tokens_out[samples, :fed].tolist()):
            self.turns.keep((*prompts[sample], *tokens), kept, r, starts[r])


class HFGenerateBackend:
    """``model.generate`` with scores; log-probs recomputed from the returned logits."""

    def __init__(self, policy: SamplingPolicy):
        self.policy = policy

    def generate(self, prompts, params, generator, seeds=None) -> list[Generation]:
        policy = self.policy
        ids, mask = left_pad(prompts, policy.pad_token_id, policy.device)
        greedy = params.temperature <= 0
        kwargs: dict[str, Any] = {"do_sample": not greedy, "max_new_tokens": params.max_new_tokens}
        if not greedy:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        if (generator is not None or seeds is not None) and not greedy:  # one stream for the batch (see the module doc)
            mixed = np.random.SeedSequence(row_seeds(len(prompts), generator, seeds)).generate_state(1)[0]
            torch.manual_seed(int(mixed))
        out = policy.model.generate(
            input_ids=ids, attention_mask=mask, output_logits=True, return_dict_in_generate=True,
            pad_token_id=policy.pad_token_id, eos_token_id=list(policy.chat.stop_token_ids), **kwargs,
        )
        new = out.sequences[:, ids.shape[1] :]
        logits = torch.stack(out.logits, dim=1).float()  # (B, N, V)
        scale = 1.0 if greedy else params.temperature
        logp = F.log_softmax(logits / scale, dim=-1).gather(-1, new[..., None]).squeeze(-1)
        return _finish(policy, new.tolist(), logp.tolist(), params)


def vllm_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The weights of ``model`` under the names of its Hugging Face checkpoint, as vLLM's
    ``load_weights`` takes them; under LoRA the adapters merged in (the model is not modified).

    peft names (``base_model.model.<name>.base_layer.weight``, ``lora_A``/``lora_B``,
    ``modules_to_save``) map back to the base model's own ``<name>.weight``.
    """
    if not (hasattr(model, "peft_config") and hasattr(model, "get_base_model")):
        yield from model.state_dict().items()
        return
    base = model.get_base_model()
    for name, tensor in base.state_dict().items():
        if "lora_" in name or ".original_module." in name:
            continue  # adapter factors are merged below; a replaced module's original is not served
        if ".base_layer." in name:
            path, _, leaf = name.rpartition(".base_layer.")
            layer = base.get_submodule(path)
            if leaf == "weight" and not getattr(layer, "merged", False):
                for adapter in getattr(layer, "active_adapters", ()):
                    if adapter in getattr(layer, "lora_A", {}):
                        tensor = tensor + layer.get_delta_weight(adapter).to(tensor.dtype)
            name = f"{path}.{leaf}"
        yield name.replace(".modules_to_save.default.", "."), tensor


def vllm_model(engine: Any) -> Any:
    """The model object inside an in-process vLLM ``LLM`` (it has ``load_weights``).

    vLLM moved it across versions: V1 in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``)
    and V0 keep it under ``llm_engine.model_executor.driver_worker[.worker].model_runner.model``.
    """
    executor = getattr(getattr(engine, "llm_engine", None), "model_executor", None)
    worker = getattr(executor, "driver_worker", None)
    for holder in (getattr(worker, "worker", None), worker):
        model = getattr(getattr(holder, "model_runner", None), "model", None)
        if model is not None and hasattr(model, "load_weights"):
            return model
    return None


class WeightSync:
    """Pushes the policy's weights into a generation engine when they changed since the last push.

    Args:
        policy: The trained policy (its ``weights_version`` says when the weights changed).
        load: Called with an iterator of ``(name, tensor)`` (see :func:`vllm_weights`).
    """

    def __init__(self, policy: SamplingPolicy, load: Callable[[Iterator[tuple[str, torch.Tensor]]], Any]):
        self.policy, self.load = policy, load
        self.synced_version: int | None = None

    @torch.no_grad()
    def __call__(self) -> bool:
        """Push if needed; return whether it pushed."""
        if self.synced_version == self.policy.weights_version:
            return False
        self.load(vllm_weights(self.policy.model))
        self.synced_version = self.policy.weights_version
        return True


class VLLMBackend:
    """vLLM's offline engine (GPU), in this process, sharing the GPU with training.

    The engine loads the policy's starting weights from ``policy.name_or_path``; after every
    optimizer step (or a loaded checkpoint) the next :meth:`generate` pushes the current weights
    (LoRA merged in) through the model's ``load_weights`` and resets vLLM's prefix cache, whose
    entries were computed with the old weights.

    Args:
        policy: The policy to sample from.
        gpu_memory_utilization: Fraction of the GPU vLLM may take (weights + KV cache); the rest
            is left to training.
    """

    def __init__(self, policy: SamplingPolicy, gpu_memory_utilization: float = 0.4):
        try:
            import vllm  # noqa: F401
        except ImportError as err:
            raise ConfigError("backend='vllm' needs vLLM: pip install vllm (GPU only).") from err
        import os

        from vllm import LLM

        # The engine must live in this process for its weights to be replaced in place.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.policy = policy
        dtype = policy.autocast_dtype or next(policy.model.parameters()).dtype
        self.engine = LLM(
            model=policy.name_or_path, dtype=str(dtype).removeprefix("torch."), enable_prefix_caching=True,
            gpu_memory_utilization=gpu_memory_utilization,
        )
        self.sync = WeightSync(policy, self._load_weights)  # the first generate() pushes the policy's weights

    def _load_weights(self, weights: Iterator[tuple[str, torch.Tensor]]) -> None:
        model = vllm_model(self.engine)
        if model is not None:
            model.load_weights(weights)
        elif hasattr(self.engine, "apply_model"):  # the engine runs in worker processes: ship the weights there
            cpu = [(name, tensor.detach().cpu()) for name, tensor in weights]
            self.engine.apply_model(lambda m: m.load_weights(cpu))
        else:
            raise ConfigError(
                "Cannot update the weights of this vLLM version's engine (no in-process model and no "
                "LLM.apply_model); set VLLM_ENABLE_V1_MULTIPROCESSING=0 or use a vLLM release with LLM.apply_model."
            )
        if hasattr(self.engine, "reset_prefix_cache"):  # cached prefixes hold the old weights' keys and values
            self.engine.reset_prefix_cache()

    def generate(self, prompts, params, generator, seeds=None) -> list[Generation]:
        from vllm import SamplingParams as VSampling
        from vllm.inputs import TokensPrompt

        self.sync()
        seeded = generator is not None or seeds is not None
        per_row = row_seeds(len(prompts), generator, seeds) if seeded else [None] * len(prompts)
        sampling = [  # a seeded request samples from its own generator in vLLM
            VSampling(
                temperature=max(params.temperature, 0.0), top_p=params.top_p, max_tokens=params.max_new_tokens,
                stop=list(params.stop) or None, stop_token_ids=list(self.policy.chat.stop_token_ids), logprobs=0,
                seed=None if seed is None else seed % 2**31,
            )
            for seed in per_row
        ]
        results = self.engine.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], sampling, use_tqdm=False)
        out = []
        for result in results:
            comp = result.outputs[0]
            lps = [next(iter(d.values())).logprob if d else 0.0 for d in (comp.logprobs or [])]
            reason = "length" if comp.finish_reason == "length" else "stop"
            out.append(Generation(list(comp.token_ids), lps, comp.text, reason))
        return out


#: ``backend`` choices (:data:`~mathgym.agents.choices.Backend`) -> the class that samples for a policy.
BACKENDS: dict[str, Callable[[SamplingPolicy], GenerationBackend]] = {
    "native": NativeBackend, "hf": HFGenerateBackend, "vllm": VLLMBackend,
}
