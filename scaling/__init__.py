"""Scaling-law experiments: IsoFLOP sweeps of small transformers and the fits that read them."""

__version__ = "0.1.0"
