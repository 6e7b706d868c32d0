"""Adapters between mathgym and other libraries (TRL, verl, OpenRLHF, SB3, Ray).

Each module imports its own third-party library; nothing else in mathgym imports these modules.
"""
