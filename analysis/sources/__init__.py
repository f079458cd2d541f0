"""Sources of runs, read once and checked into one typed schema.

schema     ColumnMap (which column is what), RunTable (checked runs), Source (table + raw facts)
load       the one reader: read_source / load_runs (store directory, CSV/Parquet/JSON, wandb:ENTITY/PROJECT)
files      CSV/TSV/Parquet/JSON/JSONL files;  wandb: a wandb project (online);  a store: `scaling.store.read_store` (in load)
check      the rules every source passes: completed runs, one corpus, finite N/D/loss, C = 6·N·D
budgets    the one rule grouping runs into compute budgets
rows       bad rows (excluded and listed), exact duplicates (counted once), units (one id per (N, D))
groups     --where filters, --group-by, the guard against pooling experiments
"""
