"""Tests of mathgym.algos: the trainers, their losses, batch sources and run machinery."""
