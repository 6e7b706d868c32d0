"""Tests of mathgym.integrations: TRL, verl, OpenRLHF, SB3, verifiers."""
