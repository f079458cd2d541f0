"""`scaling sweep NAME_OR_FILE [overrides...]`: a Hydra multirun of one file in sweeps/.

Equivalent plain Hydra (sweeps/ is on the config search path):
``scaling train --multirun --config-name NAME [overrides]``. ``scaling sweep NAME --cfg job`` (or
``--cfg hydra``, ``--info``) prints instead of launching, as Hydra does for a single run.
The command line is composed once first, so a typo is one clear line, not a traceback.
"""

from __future__ import annotations

from pathlib import Path

from scaling.errors import ConfigError

SWEEPS_DIR = Path(__file__).resolve().parent.parent / "sweeps"


def available_sweeps() -> str:
    return ", ".join(sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml")))


def resolve_sweep(name_or_file: str) -> Path:
    """sweeps/NAME.yaml, or a path to a sweep file."""
    candidates = [Path(name_or_file), SWEEPS_DIR / f"{name_or_file}.yaml", SWEEPS_DIR / name_or_file]
    for path in candidates:
        if path.is_file() and path.suffix in (".yaml", ".yml"):
            return path.resolve()
    raise ConfigError(
        f"sweep {name_or_file!r}: no such sweep file; valid: {available_sweeps()}, or a path to a .yaml sweep file"
    )


def hydra_command_line(path: Path, rest: list[str]) -> list[str]:
    """The plain-Hydra command line of `scaling sweep PATH REST...`: the sweep file as the primary
    config, and --multirun unless the command only prints (--cfg, --info, --help)."""
    from scaling.train_app import only_shows, parse_command_line

    location = [] if path.parent == SWEEPS_DIR else ["--config-dir", str(path.parent)]
    multirun = [] if only_shows(parse_command_line(rest)) else ["--multirun"]
    return [*location, "--config-name", path.stem, *multirun, *rest]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: scaling sweep NAME_OR_FILE [key=value ...] [hydra/launcher=joblib|submitit_local|slurm]\n"
            "       scaling sweep NAME_OR_FILE --cfg job|hydra   (print the composed config, launch nothing)\n"
            f"sweeps: {available_sweeps()}\nprogress of a running or finished sweep: scaling status results/NAME"
        )
        return 0
    from scaling.train_app import precheck, run_hydra

    command_line = hydra_command_line(resolve_sweep(argv[0]), argv[1:])
    precheck(command_line)
    run_hydra("scaling sweep", command_line)
    return 0
