"""Trainers and their building blocks (needs the ``train`` extra).

- :mod:`~mathgym.algos.batch`: ``Episode`` / ``RolloutBatch``
- :mod:`~mathgym.algos.rollout`: ``RolloutCollector`` over any (vector) env
- :mod:`~mathgym.algos.advantages`, :mod:`~mathgym.algos.losses`: pure functions
- :mod:`~mathgym.algos.trainer`: the shared loop; :mod:`~mathgym.algos.grpo`, :mod:`~mathgym.algos.sft`
- :mod:`~mathgym.algos.registry`: ``--algo NAME`` → trainer and config
"""
