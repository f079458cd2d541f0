"""Scaling-law analysis: from a source of runs to fitted laws with intervals, figures and a report.

Packages (data flows top to bottom; a package imports only from those above it; nothing here imports torch):
  published  published constants (Hoffmann et al. 2022, Kaplan et al. 2020)
  sources/   read a source once (store directory, CSV/Parquet/JSON, wandb) into one typed schema:
             schema (ColumnMap, RunTable, Source), load (read_source, load_runs), check (the rules),
             budgets (the one budget rule), rows (bad rows, duplicates, units), groups (--where,
             --group-by, the experiment guard), hparams (a hyperparameter sweep: one point per
             (N, budget)), files, wandb
  fits/      laws (pure functions), envelope (approach 1), isoflop (2), parametric (3, Huber on
             log-loss; bfgs_batch), bootstrap, powerlaws, validation (hold out the largest budget),
             fit (all approaches -> FitReport), results (result objects + JSON), optimal (N, D for a budget),
             hplaws (the optimal LR and batch size as power laws of N, D or C, with intervals)
  synthetic  runs drawn from a known law (fits.laws), to check a fitting setup
  describe/  how numbers and fits read, the one description every renderer lays out: numbers (10k, 2.5M,
             1e12, value [interval]), fit (each approach's estimates, bootstrap, validation, legends,
             caption phrases), allocation (an Allocation's items and report cells), hparams (LR and
             batch-size laws, the recommended LR and batch at N_opt)
  compare/   recipe comparison: approach-3 frontiers, the effective compute multiplier m(C), its bootstrap
  figures/   one module per figure family, each with its caption(report); axes (palettes, log axes, bands);
             make_figures, figure_bytes, figure_caption
  report/    blocks, render (HTML + Markdown, atomic writes), sections: sweep, laws, hparams, allocation, runs
  cli/       one module per verb: fit, optimal, plot, report, compare; common (parser, options, source and fit)
"""
