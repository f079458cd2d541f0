"""A seeded Markov source whose entropy rate is known exactly (the `synthetic` corpus).

An order-k Markov chain over V symbols: the next symbol depends on the previous k symbols (the
*context*, one of V^k states). Each context's next-symbol distribution is a draw from a symmetric
Dirichlet(alpha) over the V symbols; a small alpha gives sparse rows (a few likely successors per
context), which is structure a model must learn, context by context.

Its entropy rate (Cover & Thomas, *Elements of Information Theory*, 2nd ed., Thm. 4.2.4) is

    h = sum_s pi(s) * H(P(. | s)),   H(p) = -sum_y p(y) ln p(y)   [nats per symbol]

with pi the stationary distribution of the chain on contexts. No model can do better than h in
expectation, so h is the true irreducible loss that a fitted scaling law's E can be checked
against. pure numpy; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.errors import DataError

# Each segment of a sampled stream is an independent stationary run of the chain, this long.
# Segments let the sampler advance many runs at once (vectorised); a join costs a model at most
# `order` poorly predictable symbols per segment, i.e. < order * ln(V) / SEGMENT_TOKENS nats/token.
SEGMENT_TOKENS = 1 << 16
_STATIONARY_TOL = 1e-15  # L1 change between power iterations at which pi has converged
_STATIONARY_MAX_ITER = 100_000
MAX_TABLE_ENTRIES = 1 << 22  # V^(k+1) cap: 32 MiB of float64 transition table
MIN_CONCENTRATION = 0.05  # smaller: Dirichlet draws can underflow to exact zeros (a chain that may not mix)
SAMPLER_VERSION = 1  # bump if sample_stream's output for given arguments changes
_STEPS_PER_DRAW = 4096  # sampler steps per block of uniforms (part of the stream's definition)


@dataclass(frozen=True)
class MarkovChain:
    """An order-`order` chain. Row s of `transition` is P(next | context s), where the context
    (x_{t-k}, ..., x_{t-1}) is numbered s = sum_i x_{t-k+i} * V^(k-1-i) (oldest symbol most
    significant). `stationary` is pi over contexts; `entropy_rate` is h in nats per symbol."""

    transition: np.ndarray
    order: int
    stationary: np.ndarray
    entropy_rate: float

    @property
    def vocab_size(self) -> int:
        return self.transition.shape[1]

    def context_entropies(self) -> list[float]:
        """[H(X_t | X_0 .. X_{t-1}) for t = 0 .. order] in nats, for the stationary chain: the best
        expected loss on a symbol that has only t symbols of context (as at the start of a
        model's window); the last entry is h. Each is H(last t symbols, next) - H(last t symbols),
        from the joint pi(s) P(y|s) with the oldest order - t symbols summed out."""
        vocab, order = self.vocab_size, self.order
        joint = self.stationary[:, None] * self.transition
        entropies = []
        for t in range(order + 1):
            recent = joint.reshape(vocab ** (order - t), vocab ** (t + 1)).sum(axis=0)
            entropies.append(_entropy(recent) - _entropy(recent.reshape(vocab**t, vocab).sum(axis=1)))
        return entropies


def random_markov_chain(vocab_size: int, order: int, concentration: float, seed: int) -> MarkovChain:
    """Draw each context's row from Dirichlet(concentration * 1_V) with a seeded generator, then
    compute pi and h exactly. Same arguments, same chain, on any machine (numpy's PCG64)."""
    rng = np.random.default_rng([seed, 0])
    alpha = np.full(vocab_size, float(concentration))
    transition = rng.dirichlet(alpha, size=vocab_size**order)
    stationary = stationary_distribution(transition, order)
    return MarkovChain(transition, order, stationary, entropy_rate(transition, stationary))


def _advance(dist: np.ndarray, transition: np.ndarray, order: int) -> np.ndarray:
    """One step of the chain on contexts: dist'(x_2..x_k, y) = sum_{x_1} dist(x_1..x_k) P(y | x_1..x_k)."""
    vocab = transition.shape[1]
    joint = (dist[:, None] * transition).reshape(vocab, vocab ** (order - 1), vocab)
    return joint.sum(axis=0).reshape(-1)


def stationary_distribution(transition: np.ndarray, order: int) -> np.ndarray:
    """pi with pi = pi T for the context chain, by power iteration from the uniform distribution
    until the L1 change is below 1e-15 (machine precision for a probability vector)."""
    dist = np.full(transition.shape[0], 1.0 / transition.shape[0])
    for _ in range(_STATIONARY_MAX_ITER):
        new = _advance(dist, transition, order)
        new /= new.sum()
        if np.abs(new - dist).sum() < _STATIONARY_TOL:
            return new
        dist = new
    raise DataError(
        f"data.concentration: the Markov chain did not mix within {_STATIONARY_MAX_ITER} steps; "
        "use a larger concentration (rows with near-zero entries can make the chain reducible)"
    )


def _plogp(p: np.ndarray) -> np.ndarray:
    """p ln p elementwise, with 0 ln 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p > 0, p * np.log(p), 0.0)


def _entropy(p: np.ndarray) -> float:
    return float(-_plogp(p).sum())


def entropy_rate(transition: np.ndarray, stationary: np.ndarray) -> float:
    """h = sum_s pi(s) H(P(.|s)) in nats."""
    return float(-(stationary @ _plogp(transition).sum(axis=1)))


def alias_tables(transition: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias tables for every row at once (Vose's construction, run on all rows in
    lockstep): draw column j uniformly, keep j with probability keep[s, j], else take alias[s, j].
    Each round settles, in every row, the smallest unsettled entry against the largest one; the
    unsettled entries of a row always sum to their count, so the smallest is <= 1 <= the largest.
    Exact up to float rounding; O(V) rounds of O(V^k * V) work."""
    n_rows, vocab = transition.shape
    rows = np.arange(n_rows)
    scaled = transition * vocab
    keep = np.ones_like(scaled)
    alias = np.tile(np.arange(vocab), (n_rows, 1))
    settled = np.zeros(scaled.shape, dtype=bool)
    for _ in range(vocab - 1):
        small = np.where(settled, np.inf, scaled).argmin(axis=1)
        settled[rows, small] = True
        large = np.where(settled, -np.inf, scaled).argmax(axis=1)
        keep[rows, small] = scaled[rows, small]
        alias[rows, small] = large
        scaled[rows, large] -= 1.0 - scaled[rows, small]
    return keep, alias  # the last unsettled entry of each row keeps itself (keep = 1)


def sample_stream(chain: MarkovChain, n_tokens: int, seed: int | list[int]) -> np.ndarray:
    """`n_tokens` symbols (uint8 when V <= 256, else uint16): ceil(n / SEGMENT_TOKENS) independent
    segments, each started from pi and run forward side by side with alias sampling, then
    concatenated and cut to length. A pure function of (chain, n_tokens, seed); `seed` is anything
    `np.random.default_rng` takes (the synthetic corpus uses [seed, 1] for train, [seed, 2] for val)."""
    vocab, order = chain.vocab_size, chain.order
    n_states = vocab**order
    n_segments = -(-n_tokens // SEGMENT_TOKENS)
    length = min(n_tokens, SEGMENT_TOKENS)
    rng = np.random.default_rng(seed)
    out = np.empty((n_segments, length), dtype=np.uint8 if vocab <= 256 else np.uint16)
    state = rng.choice(n_states, size=n_segments, p=chain.stationary)
    for i in range(order):  # the initial context's digits are the first `order` symbols
        out[:, i] = (state // vocab ** (order - 1 - i)) % vocab
    keep, alias = (table.reshape(-1) for table in alias_tables(chain.transition))
    for start in range(order, length, _STEPS_PER_DRAW):  # uniforms in blocks: bounded memory
        scaled_uniforms = rng.random((min(_STEPS_PER_DRAW, length - start), n_segments)) * vocab
        columns = np.minimum(scaled_uniforms.astype(np.int64), vocab - 1)
        fractions = scaled_uniforms - columns  # uniform on [0, 1), independent of the column
        for column, fraction, t in zip(columns, fractions, range(start, length)):
            cell = state * vocab + column
            nxt = np.where(fraction < keep[cell], column, alias[cell])
            out[:, t] = nxt
            state = (state % (n_states // vocab)) * vocab + nxt
    return out.reshape(-1)[:n_tokens]
