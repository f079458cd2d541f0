"""Scaling-law analysis: from a table of runs to fitted laws with intervals and allocations.

Modules (data flows top to bottom; nothing here imports torch):
  table        load and check runs from a results store, CSV/Parquet or wandb -> RunTable
  laws         the laws as pure functions (power laws, Kaplan's joint form, Chinchilla's L(N, D))
  envelope     approach 1: envelope of the loss curves
  isoflop      approach 2: IsoFLOP parabolas, then N_opt and D_opt power laws
  parametric   approach 3: Huber fit of L(N, D) on log-loss
  bootstrap    resampling shared by the fits;  powerlaws: power-law fitting helpers
  validation   refit without the largest budget and predict it
  fit          run the approaches on one table -> FitReport (results.py: result objects + JSON)
  optimal      compute-optimal N, D for a budget from presets or fits; inverse; data-capped
  synthetic    runs drawn from a known law, to check a fitting setup
  cli          `scaling fit` and `scaling optimal`
"""
