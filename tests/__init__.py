"""mathgym's test suite.

A regular package (not a namespace one), so that a stray top-level ``tests`` package that
another distribution installs into site-packages (openrlhf 0.11.2's wheel does) cannot shadow it.
"""
