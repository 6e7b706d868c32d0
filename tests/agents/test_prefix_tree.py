"""The prefix-tree forward pass: its tree holds every distinct prefix once, and its hidden states and
gradients are the decoder's own (Llama with grouped keys, Qwen2 with biases, LoRA); a model it cannot
serve keeps its own forward."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from mathgym.agents.forward import forward_pass  # noqa: E402
from mathgym.agents.fast.prefix_tree import prefix_tree, tree_forward  # noqa: E402


def _batch(vocab: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of 3 prompts whose samples share first tokens, repeat, and end at different lengths."""
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (5, 7, 4)]
    rows = []
    for i in range(12):
        head = torch.randint(3, vocab, (2,), generator=gen).tolist() if i % 3 else [7, 8]  # every third agrees longer
        tail = torch.randint(3, vocab, (i % 4,), generator=gen).tolist()
        rows.append(prompts[i % 3] + head + tail)
    rows.append(rows[0])  # a whole repeat
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return ids, mask


def test_the_tree_holds_each_distinct_prefix_once():
    ids, mask = _batch()
    tree = prefix_tree(ids, mask)
    real = mask.bool()
    rows = [ids[b, : int(mask[b].sum())].tolist() for b in range(len(ids))]
    # brute force: the distinct (prefix up to t) of every real position
    prefixes = {tuple(r[: t + 1]) for r in rows for t in range(len(r))}
    assert len(tree.tokens) == len(prefixes) < int(real.sum())
    for b, row in enumerate(rows):
        for t in range(len(row)):
            node = int(tree.node_of[b, t])
            assert int(tree.tokens[node]) == row[t] and int(tree.positions[node]) == t
            for c, other in enumerate(rows):  # same node exactly where the rows agree up to t
                same_prefix = len(other) > t and other[: t + 1] == row[: t + 1]
                assert (int(tree.node_of[c, t]) == node) == same_prefix
    # each node's owner (a distinct row's position) holds that node
    layout = tree.node_of[tree.rows].flatten()
    assert torch.equal(layout[tree.owner], torch.arange(len(tree.tokens)))


def test_rows_not_right_padded_have_no_tree():
    ids = torch.tensor([[0, 5, 6], [4, 5, 6]])
    assert prefix_tree(ids, torch.tensor([[0, 1, 1], [1, 1, 1]])) is None  # left padding
    assert prefix_tree(ids, torch.tensor([[1, 0, 1], [1, 1, 1]])) is None  # a hole


def _llama(**extra):
    config = transformers.LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **extra)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def _qwen2():
    config = transformers.Qwen2Config(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(config)


def _lora():
    peft = pytest.importorskip("peft")
    model = _llama()
    return peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj", "up_proj"]))


@pytest.mark.parametrize("attention", ["products", "fused"])
@pytest.mark.parametrize("build", [_llama, _qwen2, _lora], ids=["llama-grouped-keys", "qwen2-biases", "llama-lora"])
def test_log_probs_and_gradients_are_the_plain_passes(build, attention, monkeypatch):
    import mathgym.agents.fast.prefix_tree as prefix_tree_module

    if attention == "fused":  # long rows: the fused kernel rather than matrix products
        monkeypatch.setattr(prefix_tree_module, "SMALL_ATTENTION", 0)
    model = build()
    model.train()
    decoder = model.get_decoder()
    assert tree_forward(decoder) is not None  # the tree serves it
    ids, mask = _batch()
    positions = mask.clone()
    positions[:, 0] = 0
    results = []
    for groups in (None, torch.arange(len(ids)) % 3):  # groups: the tree; none: the plain pass
        model.zero_grad()
        out = forward_pass(model, ids, mask, temperature=0.7, groups=groups, positions=positions, entropy_grad=True)
        ((out.logprobs + 0.1 * out.entropy) * positions).sum().backward()
        grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
        results.append((out.logprobs.detach(), grads))
    (plain, plain_grads), (tree, tree_grads) = results
    assert torch.allclose(plain, tree, atol=1e-5)
    for a, b in zip(plain_grads, tree_grads):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)
    # and the hidden states themselves, on every real position
    with torch.no_grad():
        theirs = decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        ours = tree_forward(decoder)(ids, mask)
    assert torch.allclose(ours[mask.bool()], theirs[mask.bool()], atol=1e-5)
    assert not ours[~mask.bool()].any()


def test_a_decoder_it_cannot_serve_keeps_its_own_forward():
    dropout = _llama(attention_dropout=0.1).train()
    assert tree_forward(dropout.get_decoder()) is None  # dropout drawn: each row its own draw
    assert tree_forward(dropout.eval().get_decoder()) is not None

    checkpointed = _llama().train()
    checkpointed.gradient_checkpointing_enable()
    assert tree_forward(checkpointed.get_decoder()) is None  # the memory the user asked to save

    hooked = _llama()
    handle = hooked.get_decoder().layers[1].self_attn.register_forward_hook(lambda *args: None)
    assert tree_forward(hooked.get_decoder()) is None  # a hook on a module the tree pass does not call
    handle.remove()
    assert tree_forward(hooked.get_decoder()) is not None


def test_a_forward_set_on_the_decoder_is_probed_again_and_refused_when_it_differs():
    model = _llama()
    decoder = model.get_decoder()
    assert tree_forward(decoder) is not None
    own = decoder.forward

    def shifted(*args, **kwargs):  # computes something else than the layers
        out = own(*args, **kwargs)
        out.last_hidden_state = out.last_hidden_state + 1.0
        return out

    decoder.forward = shifted
    assert tree_forward(decoder) is None
    del decoder.forward
    assert tree_forward(decoder) is not None


def test_the_reference_pass_runs_the_tree_with_the_whole_pass_log_probs(tmp_path, monkeypatch):
    from mathgym.agents.forward import ReferencePolicy
    from mathgym.agents.policy import LLMPolicy
    from mathgym.agents.fast.prefix_tree import TreeForward
    from tests.trainkit import build_small_model

    policy = LLMPolicy.from_pretrained(str(build_small_model(tmp_path / "model")), device="cpu")
    reference = ReferencePolicy(policy, "copy")
    ids, mask = _batch(vocab=30)
    calls, run = [], TreeForward.__call__
    monkeypatch.setattr(TreeForward, "__call__", lambda self, *args: calls.append(len(args[0])) or run(self, *args))
    plain = reference.forward(ids, mask, 0.7).logprobs  # the whole pass: every position's logits
    assert not calls
    shared = reference.forward(ids, mask, 0.7, positions=mask, groups=torch.arange(len(ids)) % 3).logprobs
    assert calls  # the pass for the wanted positions ran the tree
    assert torch.allclose(plain * mask, shared, atol=1e-5)


def test_the_gradients_are_the_same_bits_run_after_run():
    # Gathers whose backward adds in whatever order the threads take would change the last bits
    # from one run to the next (a warm start would land elsewhere each time).
    model = _llama().train()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 40, (64, 30), generator=gen)
    ids[:, :10] = ids[0, :10]
    mask = (torch.arange(30) < torch.randint(15, 31, (64,), generator=gen)[:, None]).long()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(3):
            model.zero_grad()
            (forward_pass(model, ids, mask, positions=mask).logprobs * mask).sum().backward()
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    finally:
        torch.set_num_threads(threads)
    assert tree_forward(model.get_decoder()) is not None
    assert all(torch.equal(grads[0], g) for g in grads[1:])


def test_a_batch_the_tree_would_barely_shrink_runs_the_decoders_own_pass(monkeypatch):
    from mathgym.agents.fast.prefix_tree import TreeForward

    model = _llama()
    tree = tree_forward(model.get_decoder())
    gen = torch.Generator().manual_seed(2)
    distinct = torch.randint(3, 40, (6, 20), generator=gen)  # full rows, no shared first token: nothing to save
    distinct[:, 0] = torch.arange(3, 9)
    assert tree(distinct, torch.ones_like(distinct)) is None
    shared = distinct.clone()
    shared[:, :8] = distinct[0, :8]  # 8 of 20 positions shared by all six rows: 40 of 120 saved
    assert tree(shared, torch.ones_like(shared)) is not None
    calls, run = [], TreeForward.nodes
    monkeypatch.setattr(TreeForward, "nodes", lambda self, t: calls.append(1) or run(self, t))
    mask = torch.ones_like(distinct)
    out = forward_pass(model, distinct, mask, positions=mask)  # falls back to the plain pass
    assert not calls and out.logprobs.shape == distinct.shape


def test_a_batch_without_a_real_token_runs_the_decoders_own_pass():
    model = _llama()
    ids, mask = torch.zeros(3, 5, dtype=torch.long), torch.zeros(3, 5, dtype=torch.long)
    assert tree_forward(model.get_decoder())(ids, mask) is None
    assert forward_pass(model, ids, mask, positions=mask).logprobs.shape == (3, 5)  # no crash: nothing wanted


def test_an_empty_row_beside_real_ones_leaves_every_gradient_finite():
    # Its padding queries attend to nothing real; they must not turn the pass's gradients into NaN.
    model = _llama().train()
    ids, mask = _batch()
    ids, mask = torch.cat([ids, torch.zeros_like(ids[:1])]), torch.cat([mask, torch.zeros_like(mask[:1])])
    assert tree_forward(model.get_decoder())(ids, mask) is not None
    (forward_pass(model, ids, mask, positions=mask).logprobs * mask).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
