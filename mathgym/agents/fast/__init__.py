"""The fast inference path: a specialist replacement for Hugging Face ``generate``/``forward`` passes.

The general code (:mod:`mathgym.agents.backends`' sampling loop, :func:`~mathgym.agents.forward.forward_pass`)
runs any causal LM through its own forward. The modules here compute the same outputs for less
work, and serve a model only where they know its layout (or its cache's) and were checked against
the general path on probe inputs; anywhere else the general path runs:

- :mod:`~mathgym.agents.fast.lean_decode`: one decoding step of a Llama-layout model without the
  framework's per-layer work, its keys and values in growing buffers.
- :mod:`~mathgym.agents.fast.turn_cache`: a multi-turn episode's key/value rows kept from one
  turn to the next, so a turn runs only its new tokens.
- :mod:`~mathgym.agents.fast.prefix`: a group's shared prefix run once in a training forward pass.
- :mod:`~mathgym.agents.fast.prefix_tree`: every distinct prefix of a batch run once, for a
  Llama-layout decoder.

Imports point from the general code into this folder, never back: what both use (the cache
helpers of :mod:`~mathgym.agents.kv_cache`, :func:`~mathgym.agents.dropout.draws_dropout`,
:func:`~mathgym.agents.sampling.left_pad`) lives below both.
"""
