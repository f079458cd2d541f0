"""Scaling laws as pure functions of numpy arrays (no state, no fitting).

Notation: N parameters, D training tokens, C = 6·N·D training FLOPs (Kaplan et al. 2020, §2.1),
L held-out loss (in the table's unit: nats per token for the store's val_loss). Every function
broadcasts over array arguments.
"""

from __future__ import annotations

import numpy as np

from scaling.flops import FLOPS_PER_PARAM_TOKEN, tokens_6nd


def flops_to_nd(compute):
    """N·D = C / 6: the product of parameters and tokens that C FLOPs buy."""
    return compute / FLOPS_PER_PARAM_TOKEN


def power_law(x, coefficient, exponent, floor=0.0):
    """y = floor + coefficient · x^exponent.

    With ``floor = 0`` this is a pure power law (a straight line on log-log axes); with a
    positive floor it is the power law with an irreducible term, e.g. L(C) = E + A·C^(−α)
    (exponent = −α). Allocation laws use it with a positive exponent: N_opt(C) = G·C^a.
    """
    return floor + coefficient * np.power(x, exponent)


def chinchilla_loss(n, d, E, A, B, alpha, beta):
    """L(N, D) = E + A/N^α + B/D^β  (Hoffmann et al. 2022, Eq. 2).

    E is the irreducible loss (the entropy of text); A/N^α the excess loss of a finite model
    trained to convergence; B/D^β the excess loss of finite data. Published fit (approach 3):
    E = 1.69, A = 406.4, B = 410.7, α = 0.34, β = 0.28.
    """
    return E + A * np.power(n, -alpha) + B * np.power(d, -beta)


def chinchilla_log_loss(log_n, log_d, e, a, b, alpha, beta):
    """log L(N, D) = LSE(a − α·log N, b − β·log D, e) with e = log E, a = log A, b = log B.

    The log-sum-exp form of `chinchilla_loss` that Hoffmann et al. 2022 (App. D.2) fit: it is
    exact, stays finite for any parameters and is linear in (a, α) and (b, β) inside each term.
    Computed stably: LSE(u) = max(u) + log Σ exp(u − max(u)).
    """
    u1 = a - alpha * log_n
    u2 = b - beta * log_d
    top = np.maximum(np.maximum(u1, u2), e)
    return top + np.log(np.exp(u1 - top) + np.exp(u2 - top) + np.exp(e - top))


def kaplan_joint_loss(n, d, n_c, d_c, alpha_n, alpha_d):
    """L(N, D) = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D  (Kaplan et al. 2020, Eq. 1.5).

    N counts non-embedding parameters. Published: N_c = 8.8e13, D_c = 5.4e13 tokens,
    α_N = 0.076, α_D = 0.095 (Kaplan et al. 2020, Table 5).
    """
    return np.power(np.power(n_c / n, alpha_n / alpha_d) + d_c / d, alpha_d)


def chinchilla_allocation(compute, A, B, alpha, beta):
    """Compute-optimal (N_opt, D_opt) of L(N, D) = E + A/N^α + B/D^β under C = 6·N·D.

    Minimising L(N, C/(6N)) over N (Hoffmann et al. 2022, Eq. 4):
        N_opt = G·(C/6)^a,  D_opt = G⁻¹·(C/6)^b,
        G = (α·A / (β·B))^(1/(α+β)),  a = β/(α+β),  b = α/(α+β).
    Since a + b = 1, 6·N_opt·D_opt = C exactly.
    """
    with np.errstate(all="ignore"):  # a sample with a term <= 0 has no optimum: NaN, said by its caller (user24: a
        g = np.power(alpha * A / (beta * B), 1.0 / (alpha + beta))  # RuntimeWarning reached `scaling next`'s output)
        a = beta / (alpha + beta)
        b = alpha / (alpha + beta)
        per_six = flops_to_nd(np.asarray(compute, dtype=float))
        return g * np.power(per_six, a), np.power(per_six, b) / g


def tokens_for_compute(compute, n):
    """D = C / (6·N) (`scaling.flops.tokens_6nd`) over arrays."""
    return tokens_6nd(np.asarray(compute, dtype=float), np.asarray(n, dtype=float))
