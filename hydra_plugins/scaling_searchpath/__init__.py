"""Hydra plugin: puts conf/ and sweeps/ on the config search path."""
