"""Tests of ``mathgym.rewards``, laid out as the package is."""
