"""One decoding step of a Llama-style causal LM without the per-layer framework around it.

A decoding step of a small model is mostly overhead: the transformers forward builds a 4-D mask,
output records and keyword plumbing at every layer for one token per row. :class:`LeanStep` runs
the same modules (embedding, norms, projections, MLP, rotary embedding, output head: LoRA layers
included, since they are called, not read) with the attention written out: queries, keys and
values, the rotary embedding, the step's keys and values written in place into buffers that
grow with the generation (:class:`LeanCache`), scaled dot-product attention over the row's real
columns, the output projection. A small model whose projections are plain ``Linear`` layers
decodes with its weights joined (:meth:`LeanStep.joined_weights`: q/k/v as one matrix, gate/up as
another, copied at each generation's start): a step then launches about half the operations.

It serves a model only after two checks (:func:`lean_step`): its layers have exactly the
Llama layout (the modules above and nothing else that could act: no query/key norms, no
sliding window), and one decoding step on probe tokens gives the model's own logits. The check
is redone when a forward is set on the model's instance (accelerate's autocast wrapper, for
one). Anything else, or a model in train mode that draws dropout, keeps the model's own forward.
Hooks on the forwards of the model, its decoder, its layers and their attention run for the
prefill only; hooks on the embedding, norms, projections and MLPs run at every step too (a
generation that starts with such a hook calls the modules; one set during a generation is seen
from the next, when the weights would be joined again).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.modules import module as torch_module

from mathgym.agents.dropout import draws_dropout
from mathgym.agents.kv_cache import cache_tensors, returned_cache, with_cache

#: Submodules a layer's attention may hold: anything else (a query/key norm, a sink) could act.
_ATTENTION_PARTS = {"q_proj", "k_proj", "v_proj", "o_proj"}


class CheckedPerModule:
    """What a check found for each module, kept until a forward is set on the module's instance
    (accelerate wraps a trained model's forward in autocast, for one): that changes what the module
    computes, so the check is made again. Entries go with their modules (weak keys)."""

    def __init__(self) -> None:
        #: per module: a weak reference to the forward set on its instance when it was checked
        #: (``None``: its class's) and what the check found
        self._found: weakref.WeakKeyDictionary[torch.nn.Module, tuple[Any, Any]] = weakref.WeakKeyDictionary()

    def get(self, module: torch.nn.Module, check: Any) -> Any:
        """What ``check()`` found for ``module``, called once per forward the module has."""
        wrapper = module.__dict__.get("forward")
        if module in self._found:
            checked_with, found = self._found[module]
            if (checked_with() if checked_with is not None else None) is wrapper:
                return found
        found = check()
        self._found[module] = (weak_forward(wrapper), found)
        return found


#: Per model: its :class:`LeanStep`, or ``None`` where the model's own forward must run.
_STEPS = CheckedPerModule()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _LayerRows:
    """One layer's keys and values in a :class:`LeanCache`: ``keys``/``values`` read the columns
    written so far (what a transformers cache layer holds, for :func:`~mathgym.agents.kv_cache.cache_tensors`)."""

    __slots__ = ("key_buffer", "owner", "value_buffer")

    def __init__(self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, owner: LeanCache):
        self.key_buffer, self.value_buffer, self.owner = key_buffer, value_buffer, owner

    @property
    def keys(self) -> torch.Tensor:
        return self.key_buffer[:, :, : self.owner.length]

    @property
    def values(self) -> torch.Tensor:
        return self.value_buffer[:, :, : self.owner.length]


class LeanCache:
    """The key/value rows of a decoding loop in buffers with room for more columns: a step writes
    its column in place (a transformers cache copies every row at every step). Room grows by half
    again when it runs out (at least :data:`GROWTH` columns, at most up to ``extra`` beyond the
    prompt), so a loop whose rows stop early never holds the longest generation's memory."""

    def __init__(self, cache: Any, extra: int):
        tensors = cache_tensors(cache)
        if tensors is None:
            raise ValueError("LeanCache: a cache layout without per-layer keys and values")
        self.length = getattr(*tensors[0]).shape[-2]
        self.limit = self.length + extra
        self.layers = [_LayerRows(getattr(*tensors[i]), getattr(*tensors[i + 1]), self) for i in range(0, len(tensors), 2)]
        self.reserve(self.length)

    def reserve(self, column: int) -> None:
        """Make sure column ``column`` (0-based) can be written."""
        room = self.layers[0].key_buffer.shape[-2]
        if column < room:
            return
        room = min(self.limit, max(column + 1, room + max(GROWTH, room // 2)))
        for layer in self.layers:
            layer.key_buffer, layer.value_buffer = (_widened(t, self.length, room) for t in (layer.key_buffer, layer.value_buffer))

    def gather(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (in that order) of every buffer."""
        for layer in self.layers:
            layer.key_buffer = layer.key_buffer.index_select(0, index)
            layer.value_buffer = layer.value_buffer.index_select(0, index)


#: Columns a :class:`LeanCache` adds at least when it runs out of room.
GROWTH = 64


def _widened(buffer: torch.Tensor, written: int, room: int) -> torch.Tensor:
    """A ``(B, H, room, D)`` copy of ``buffer`` holding its first ``written`` columns."""
    wider = buffer.new_empty((*buffer.shape[:-2], room, buffer.shape[-1]))
    wider[:, :, :written] = buffer[:, :, :written]
    return wider


class LeanStep:
    """A decoding step of ``model`` (a causal LM with the Llama layout, see :func:`lean_step`)."""

    def __init__(self, decoder: Any, head: torch.nn.Module):
        # the decoder and head only, never the model: the model keys this step in a weak dictionary
        self.decoder, self.head = decoder, head
        self.layers = list(decoder.layers)
        first = self.layers[0].self_attn
        self.head_dim = int(first.head_dim)
        self.scaling = float(first.scaling)
        self.groups = int(getattr(first, "num_key_value_groups", 1))
        #: Whether :meth:`joined_weights` may join this model's weights (its layout allows it and the probe agreed).
        self.joins = _joinable(self.layers)

    def joined_weights(self) -> list[_Joined] | None:
        """Each layer's query, key and value weights as one matrix, and its gate and up weights as
        another, copied from the model now (take them again after an update), or ``None`` where
        the step must call the modules: a projection that is not a plain ``Linear`` (a LoRA layer),
        a hook that would not run, or a model too large for the copy to pay (:data:`JOIN_LIMIT`)."""
        if not self.joins or _hooked(self.layers):
            return None
        return self.copy_joined()

    def copy_joined(self) -> list[_Joined]:
        """Each layer's weights joined as :meth:`joined_weights` does, whatever hooks are set (the probe's)."""
        with torch.no_grad():
            return [_Joined(layer) for layer in self.layers]

    def __call__(
        self, tokens: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor, cache: LeanCache,
        joined: list[_Joined] | None = None,
    ) -> torch.Tensor:
        """Logits ``(B, V)`` of one new token per row; ``tokens`` and ``position_ids`` ``(B, 1)``,
        ``attention_mask`` ``(B, L + 1)`` over the ``L`` columns ``cache`` holds and the new one,
        whose keys and values are written into ``cache``. ``joined``: :meth:`joined_weights`, taken
        since the model's last update (fewer, larger operations: the same sums, differently rounded)."""
        if joined is not None:
            return self._joined_step(tokens, position_ids, attention_mask, cache, joined)
        column = cache.length
        cache.reserve(column)
        x = self.decoder.embed_tokens(tokens)
        cos, sin = self.decoder.rotary_emb(x, position_ids)
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, 1, D): broadcast over heads
        allowed = attention_mask[:, None, None, : column + 1].bool()
        batch = tokens.shape[0]
        for layer, rows in zip(self.layers, cache.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(batch, 1, -1, self.head_dim).transpose(1, 2)
            k = attn.k_proj(h).view(batch, 1, -1, self.head_dim).transpose(1, 2)
            v = attn.v_proj(h).view(batch, 1, -1, self.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            out = self._attend(rows, column, q, k * cos + rotate_half(k) * sin, v, allowed)
            x = x + attn.o_proj(out.transpose(1, 2).reshape(batch, 1, -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        cache.length = column + 1
        return self.head(self.decoder.norm(x))[:, -1, :]

    def _attend(self, rows: _LayerRows, column: int, q, k, v, allowed: torch.Tensor) -> torch.Tensor:
        """Write the step's keys and values ``(B, Hk, 1, D)`` into column ``column`` of ``rows`` and
        attend from ``q`` ``(B, Hq, 1, D)`` over the columns written so far that ``allowed`` keeps."""
        rows.key_buffer[:, :, column : column + 1] = k
        rows.value_buffer[:, :, column : column + 1] = v
        keys, values = rows.key_buffer[:, :, : column + 1], rows.value_buffer[:, :, : column + 1]
        if self.groups > 1:
            keys = keys.repeat_interleave(self.groups, dim=1)
            values = values.repeat_interleave(self.groups, dim=1)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, scale=self.scaling)

    def _joined_step(self, tokens, position_ids, attention_mask, cache, joined) -> torch.Tensor:
        column = cache.length
        cache.reserve(column)
        x = self.decoder.embed_tokens(tokens)[:, 0]  # (B, hidden): one position per row
        cos, sin = self.decoder.rotary_emb(x, position_ids)  # (B, 1, D): broadcast over heads
        allowed = attention_mask[:, None, None, : column + 1].bool()
        batch, dim = tokens.shape[0], self.head_dim
        for layer, rows, w in zip(self.layers, cache.layers, joined):
            h = F.rms_norm(x, x.shape[-1:], w.input_norm, w.input_eps)
            qkv = F.linear(h, w.qkv, w.qkv_bias).view(batch, -1, dim)  # (B, Hq + 2 Hk, D)
            turned = qkv[:, : w.rotated]
            turned = turned * cos + rotate_half(turned) * sin
            q, k, v = turned[:, : w.heads, None], turned[:, w.heads :, None], qkv[:, w.rotated :, None]  # (B, H, 1, D)
            out = self._attend(rows, column, q, k, v, allowed)
            x = x + F.linear(out.reshape(batch, -1), w.o, w.o_bias)
            h = F.rms_norm(x, x.shape[-1:], w.post_norm, w.post_eps)
            gate, up = F.linear(h, w.gate_up, w.gate_up_bias).chunk(2, dim=-1)
            x = x + F.linear(w.act(gate) * up, w.down, w.down_bias)
        cache.length = column + 1
        return self.head(self.decoder.norm(x))


#: Join a model's weights (:meth:`LeanStep.joined_weights`) only when its query, key, value, gate and
#: up weights hold at most this many numbers: a small model's step is mostly the cost of launching
#: each operation, a large one's is its matrix products, where the copy would only add memory.
JOIN_LIMIT = 16_000_000


class _Joined:
    """One layer's weights for :meth:`LeanStep._joined_step` (copies, except the norms and the output projections)."""

    def __init__(self, layer: torch.nn.Module):
        attn, mlp = layer.self_attn, layer.mlp
        projections = (attn.q_proj, attn.k_proj, attn.v_proj)
        self.heads = attn.q_proj.out_features // int(attn.head_dim)
        self.rotated = self.heads + attn.k_proj.out_features // int(attn.head_dim)
        self.qkv = torch.cat([p.weight for p in projections])
        self.qkv_bias = _joined_bias(projections)
        self.o, self.o_bias = attn.o_proj.weight, attn.o_proj.bias
        self.gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        self.gate_up_bias = _joined_bias((mlp.gate_proj, mlp.up_proj))
        self.down, self.down_bias, self.act = mlp.down_proj.weight, mlp.down_proj.bias, mlp.act_fn
        self.input_norm, self.input_eps = layer.input_layernorm.weight, _norm_eps(layer.input_layernorm)
        self.post_norm, self.post_eps = layer.post_attention_layernorm.weight, _norm_eps(layer.post_attention_layernorm)


def _joined_bias(projections) -> torch.Tensor | None:
    biases = [p.bias for p in projections]
    if all(b is None for b in biases):
        return None
    return torch.cat([b if b is not None else p.weight.new_zeros(p.out_features) for p, b in zip(projections, biases)])


def _norm_eps(norm: torch.nn.Module) -> float | None:
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    return float(eps) if isinstance(eps, (int, float)) else None


def _joinable(layers: list[torch.nn.Module]) -> bool:
    """Whether the layers' weights can be joined: plain ``Linear`` projections, an MLP of gate, up
    and down projections and an activation, norms of one weight and an epsilon (the probe then
    checks that they compute what the modules do), and no more than :data:`JOIN_LIMIT` numbers."""
    size = 0
    for layer in layers:
        attn, mlp = layer.self_attn, layer.mlp
        if {name for name, _ in mlp.named_children()} != {"gate_proj", "up_proj", "down_proj", "act_fn"}:
            return False
        linears = (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj)
        if any(type(m) is not torch.nn.Linear for m in linears):
            return False
        for norm in (layer.input_layernorm, layer.post_attention_layernorm):
            if _norm_eps(norm) is None or list(norm.children()) or getattr(norm, "bias", None) is not None:
                return False
            if not isinstance(getattr(norm, "weight", None), torch.Tensor):
                return False
        size += sum(m.weight.numel() for m in linears[:3] + linears[4:6])
    return size <= JOIN_LIMIT


def hooked(modules: Iterable[torch.nn.Module]) -> bool:
    """Whether a forward hook (or pre-hook) is set on any of ``modules``, or a global one: a pass that
    skips calling those modules would skip the hook."""
    if torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def _hooked(layers: list[torch.nn.Module]) -> bool:
    """Whether a hook is set that the joined step would skip: on a projection, a norm or an MLP, or a global one."""
    return hooked(
        part for layer in layers
        for part in (layer.input_layernorm, layer.post_attention_layernorm, layer.mlp, *layer.mlp.children(), *layer.self_attn.children())
    )


def llama_layout(decoder: Any) -> bool:
    """Whether ``decoder``'s layers are Llama's: attention of q/k/v/o projections only, two norms,
    an MLP, a shared rotary embedding, full attention on every layer."""
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if not all(hasattr(decoder, name) for name in needed) or not len(decoder.layers):
        return False
    config = getattr(decoder, "config", None)
    kinds = getattr(config, "layer_types", None)
    if kinds:  # the layers say which attention each has (Qwen2 and newer models)
        if any(kind != "full_attention" for kind in kinds):
            return False
    elif getattr(config, "sliding_window", None):  # a window for every layer (Mistral's), beyond the probe's reach
        return False
    for layer in decoder.layers:
        attn = getattr(layer, "self_attn", None)
        if attn is None or not all(hasattr(layer, n) for n in ("mlp", "input_layernorm", "post_attention_layernorm")):
            return False
        if {name for name, _ in attn.named_children()} != _ATTENTION_PARTS:
            return False
        if not all(hasattr(attn, n) for n in ("head_dim", "scaling")):
            return False
        extra = {name for name, _ in layer.named_children()} - {"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"}
        if extra:
            return False
    return True


def _agrees(step: LeanStep, model: torch.nn.Module) -> tuple[bool, bool]:
    """``(step agrees, joined step agrees)``: whether one decoding step on probe tokens (a left-padded
    row and a full one) gives the model's logits, calling the modules and with the weights joined
    (False where the layout cannot join, or a norm or an activation the joined step computes otherwise).
    The joined step is probed even while a hook is set (which keeps it from being used until removed)."""
    device = next(model.parameters()).device
    ids = torch.tensor([[0, 5, 6, 7], [4, 5, 6, 7]], device=device)
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]], device=device)
    position = (mask.cumsum(-1) - 1).clamp(min=0)
    nxt = torch.tensor([[3], [2]], device=device)
    full_mask = torch.cat([mask, torch.ones_like(nxt)], dim=1)
    with torch.no_grad():
        first = model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True)
        theirs_cache = returned_cache(first)
        if cache_tensors(theirs_cache) is None:
            return False, False
        lean, joined_lean = LeanCache(theirs_cache, 1), LeanCache(theirs_cache, 1)
        theirs = model(input_ids=nxt, attention_mask=full_mask, position_ids=position[:, -1:] + 1,
                       **with_cache(model, theirs_cache), use_cache=True).logits[:, -1, :]
        ours = step(nxt, position[:, -1:] + 1, full_mask, lean)
        joins = False
        if step.joins:
            try:
                joins = logits_close(step(nxt, position[:, -1:] + 1, full_mask, joined_lean, step.copy_joined()), theirs)
            except (RuntimeError, TypeError, ValueError, AttributeError, IndexError):
                pass  # a layer the joined step cannot run: the modules are called
    return logits_close(ours, theirs), joins


def logits_close(ours: torch.Tensor, theirs: torch.Tensor) -> bool:
    """Whether logits agree: to rounding in fp32, to the 8 bits of a half precision (weights or autocast)."""
    tolerance = 1e-4 if theirs.dtype == torch.float32 else 2e-2
    theirs, ours = theirs.float(), ours.float()
    scale = float(theirs.abs().max()) + 1e-6
    return ours.shape == theirs.shape and float((ours - theirs).abs().max()) <= tolerance * scale


def lean_step(model: torch.nn.Module) -> LeanStep | None:
    """The :class:`LeanStep` of ``model``, or ``None`` where its own forward must run: a layout
    other than Llama's, a probe step that disagrees with the model, or dropout in train mode."""
    if draws_dropout(model):
        return None
    return _STEPS.get(model, lambda: _checked_step(model))


def _checked_step(model: torch.nn.Module) -> LeanStep | None:
    """A :class:`LeanStep` for ``model`` if its layout is Llama's and the probe agrees, else ``None``."""
    found = None
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if decoder is not None and head is not None and llama_layout(decoder):
        candidate = LeanStep(decoder, head)
        was_training = model.training
        model.eval()
        try:
            agrees, candidate.joins = _agrees(candidate, model)
            if agrees:
                found = candidate
        except (RuntimeError, TypeError, ValueError, AttributeError, IndexError):  # the probe failed: the model's own forward
            found = None
        finally:
            model.train(was_training)
    return found


def weak_forward(wrapper: Any) -> Any:
    """A weak reference to ``wrapper`` (``None`` for none): a wrapper bound to the model must not keep it alive.
    One that takes no weak reference is held by a reference that never matches again (the check is redone)."""
    if wrapper is None:
        return None
    try:
        return weakref.ref(wrapper)
    except TypeError:
        return lambda: _NEVER


_NEVER = object()
