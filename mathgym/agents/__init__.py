"""Policies over language models (needs the ``train`` extra: torch, transformers, peft)."""

from mathgym.agents.policy import Generation, LLMPolicy, LoraSettings, SamplingParams
from mathgym.agents.tiny import cache_dir, tiny_model_path

__all__ = ["Generation", "LLMPolicy", "LoraSettings", "SamplingParams", "cache_dir", "tiny_model_path"]
