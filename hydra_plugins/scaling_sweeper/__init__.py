"""Hydra plugin: the IsoFLOP sweeper (budgets x shapes, planned and filtered before launch)."""
