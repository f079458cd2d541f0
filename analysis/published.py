"""Published laws' constants, each defined once: the presets of `scaling optimal` and the
synthetic truths of the tests read them from here."""

from __future__ import annotations

# Hoffmann et al. 2022 (Chinchilla), approach 3: L(N, D) = E + A/N^alpha + B/D^beta.
CHINCHILLA_APPROACH3 = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}

# Hoffmann et al. 2022, Table 3 (approaches 1-2, a = b = 0.5): N_opt = sqrt(C / 120), D_opt = 20 N_opt.
CHINCHILLA_TOKENS_PER_PARAM = 20.0

# Hoffmann et al. 2022, §3.2: their IsoFLOP runs' 9 budgets range from 6e18 to 3e21 FLOPs; the presets'
# allocations outside this range are extrapolations (as a fitted law's outside its budgets).
CHINCHILLA_BUDGETS = (6e18, 3e21)

# Hoffmann et al. 2022, abstract: "over 400 language models ranging from 70 million to over 16 billion parameters
# on 5 to 500 billion tokens": the sizes the approach-3 law was fitted on (their tokens per parameter are not given).
CHINCHILLA_SIZES = (7e7, 1.6e10)

# Hoffmann et al. 2022, Table 3 itself: (parameters, FLOPs, tokens); C = 6·N·D holds within a few percent
# (the 67 B row: 4.7%).
CHINCHILLA_TABLE3 = [
    (400e6, 1.92e19, 8.0e9),
    (1e9, 1.21e20, 20.2e9),
    (10e9, 1.23e22, 205.1e9),
    (67e9, 5.76e23, 1.5e12),
    (175e9, 3.85e24, 3.7e12),
    (280e9, 9.90e24, 5.9e12),
    (520e9, 3.43e25, 11.0e12),
    (1e12, 1.27e26, 21.2e12),
    (10e12, 1.30e28, 216.2e12),
]

# Kaplan et al. 2020: Table 6 N_opt = 1.3e9·C_min^0.73 and Eq. 1.3 L = (C_c/C_min)^0.050, C_c = 3.1e8,
# both with C in PF-days; Eq. 1.5 (with Table 5 constants) for a loss off the frontier.
KAPLAN = {
    "N_e": 1.3e9,
    "p_N": 0.73,
    "C_c_pf_days": 3.1e8,
    "alpha_C": 0.050,
    "N_c": 8.8e13,
    "D_c": 5.4e13,
    "alpha_N": 0.076,
    "alpha_D": 0.095,
}

# Muennighoff et al. 2023 ("Scaling Data-Constrained Language Models", their Eq. 5 fitted to their
# runs): L(N, D, U) = E + A/N'^alpha + B/D'^beta with effective data and parameters (see
# analysis.fits.muennighoff), given as ln A, ln B, ln E and the repetition "half-lives" R*_D, R*_N.
MUENNIGHOFF = {
    "log_A": 6.255414,
    "log_B": 7.3049974,
    "log_E": 0.6254804,
    "alpha": 0.3526596,
    "beta": 0.3526596,
    "R_D": 15.387756,
    "R_N": 5.309743,
}
