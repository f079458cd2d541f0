"""`scaling sweep NAME_OR_FILE [overrides...]`: a Hydra multirun of one file in sweeps/.

Equivalent plain Hydra: ``scaling train --multirun --config-dir sweeps --config-name NAME [overrides]``.
The sweep file's own config is composed once first, so a typo is one clear line, not a traceback.
"""
from __future__ import annotations

import sys
from pathlib import Path

from scaling.errors import ConfigError
from scaling.progress import status_main  # noqa: F401  (`scaling status`)

SWEEPS_DIR = Path(__file__).resolve().parent.parent / "sweeps"


def resolve_sweep(name_or_file: str) -> Path:
    """sweeps/NAME.yaml, or a path to a sweep file."""
    candidates = [Path(name_or_file), SWEEPS_DIR / f"{name_or_file}.yaml", SWEEPS_DIR / name_or_file]
    for path in candidates:
        if path.is_file() and path.suffix in (".yaml", ".yml"):
            return path.resolve()
    available = ", ".join(sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml")))
    raise ConfigError(f"sweep {name_or_file!r}: no such sweep file; valid: {available}, or a path to a .yaml sweep file")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        available = ", ".join(sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml")))
        print(f"usage: scaling sweep NAME_OR_FILE [key=value ...] [hydra/launcher=joblib|submitit_local|slurm]\n"
              f"sweeps: {available}\nprogress of a running or finished sweep: scaling status results/NAME")
        return 0
    from scaling.train_app import HYDRA_FLAGS, compose_config, hydra_main

    path, overrides = resolve_sweep(argv[0]), argv[1:]
    plain = [o for o in overrides if not o.startswith(("-",))]
    # compose once with the swept keys' first values, to report bad keys/values before launching
    first = [o.split(",")[0] if "=" in o and "," in o.split("=", 1)[1] and not o.split("=", 1)[1].startswith("[")
             else o for o in plain]
    compose_config([o for o in first if not o.startswith(HYDRA_FLAGS)], config_name=path.stem,
                   extra_dir=None if path.parent == SWEEPS_DIR else str(path.parent))
    location = [] if path.parent == SWEEPS_DIR else ["--config-dir", str(path.parent)]
    sys.argv = ["scaling sweep", *location, "--config-name", path.stem, "--multirun", *overrides]
    hydra_main()
    return 0
