"""Envs over HTTP: the wire format of ``mathgym serve`` and its client, ``mathgym/Remote-v0``."""
