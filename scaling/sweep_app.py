"""`scaling sweep NAME_OR_FILE [overrides...]`: a Hydra multirun of one file in sweeps/.

Equivalent plain Hydra (sweeps/ is on the config search path):
``scaling train --multirun --config-name NAME [overrides]``. ``scaling sweep NAME --cfg job`` (or
``--cfg hydra``, ``--info``) prints instead of launching, as Hydra does for a single run.
The command line is composed once first, so a typo is one clear line, not a traceback.

Exit status of `scaling sweep` (`scaling train`'s, for one run, is in scaling/train_app.py):
  0    every planned run has a completed record: trained now or already (combinations dropped at
       planning are not planned runs); a dry run (hydra.sweeper.dry_run=true); runs another process
       is training are left to it (one line names how many)
  1    a planned run did not complete: it diverged, errored, has a record that cannot be read, or
       stopped without a record (a SLURM time limit with no requeue left: its checkpoint is kept).
       The other runs went on and are recorded; a last `error:` line says how many failed and
       points at `scaling status STORE` (a relaunch retries errored runs, resumes stopped ones and
       leaves diverged ones). Also 1: the store's sweep.json or Hydra's output directory cannot be
       written (a full disk: one `error:` line; finished runs are kept). Not 2, even when nothing
       was written yet: a full disk is not bad input.
  2    bad input (sweep file, setting, override, launcher setting): one `error:` line, before
       anything is written (the store directory made to check it is writable is taken back)
  130  Ctrl-C (SIGINT), 143 SIGTERM: running runs checkpoint, the relaunch resumes them; a sweep
       killed outright (-9) leaves local workers that checkpoint and exit too (`watch_sweep` in
       hydra_plugins/scaling_sweeper/processes.py)
Tests: tests/test_sweeps.py, tests/test_faults_*.py.
"""

from __future__ import annotations

import sys
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


def check_not_shadowed(path: Path) -> None:
    """A sweep file kept elsewhere under the name of one of the project's configs (sweeps/tiny.yaml, conf/config.yaml)
    is a ConfigError: Hydra finds the project's first, and ran it instead, silently (review20)."""
    conf = SWEEPS_DIR.parent / "conf"
    if path.parent.resolve() in (SWEEPS_DIR.resolve(), conf.resolve()):
        return
    shadow = next((d / path.name for d in (conf, SWEEPS_DIR) if (d / path.name).is_file()), None)
    if shadow is not None:
        raise ConfigError(
            f"sweep file {str(path)!r} has the name of the project's {str(shadow)!r}, which Hydra would run instead; "
            "rename your file"
        )


def check_grid_keys(path: Path) -> None:
    """A budget written twice as a key of the sweep file's ``hydra.sweeper.grid`` (``1e12:`` twice, or
    ``4e10:`` and ``4.0e10:``) is a ConfigError: OmegaConf's loader refuses a duplicate key only when it
    is a string, so numeric keys would merge, the last list of shapes replacing the others."""
    import yaml

    try:
        node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # Hydra reads the file next and reports what is wrong with it
    for key in ("hydra", "sweeper", "grid"):
        if not isinstance(node, yaml.MappingNode):
            return
        node = next((v for k, v in node.value if k.value == key), None)
    seen: dict[float, str] = {}
    for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else []:
        try:
            budget = float(key_node.value)
        except ValueError:
            continue  # not a number: the sweeper names it
        if budget in seen:
            raise ConfigError(
                f"hydra.sweeper.grid in {path}: the keys {seen[budget]} and {key_node.value} (line "
                f"{key_node.start_mark.line + 1}) are the same budget {budget:g}; list its shapes under one key"
            )
        seen[budget] = key_node.value


AXES = ("budget=", "model=", "hydra.sweeper.budgets=", "hydra.sweeper.models=", "hydra.sweeper.grid")


def proposes_nothing(path: Path, rest: list[str]) -> bool:
    """Whether the sweep file sets its grid, budgets and models all empty (`scaling next`'s file of a proposal of no
    runs) and the command line gives none: nothing to launch, said and exit 0 (user29: exit 2, "no budgets")."""
    import yaml

    try:
        sweeper = ((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("hydra") or {}).get("sweeper") or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError):
        return False  # Hydra reads the file next and reports what is wrong with it
    empty = all(k in sweeper and not sweeper[k] for k in ("grid", "budgets", "models"))
    swept = {"budget", "model"} & set(sweeper.get("params") or {})  # review20: params: {budget: ..., model: ...}
    given = any(arg.startswith("-") or arg.lstrip("+~").startswith(AXES) for arg in rest)  # or --cfg, --help
    return empty and not swept and not given


def hydra_command_line(path: Path, rest: list[str]) -> list[str]:
    """The plain-Hydra command line of `scaling sweep PATH REST...`: the sweep file as the primary
    config, and --multirun unless the command only prints (--cfg, --info, --help)."""
    from scaling.train_app import only_shows, parse_command_line

    location = [] if path.parent == SWEEPS_DIR else ["--config-dir", str(path.parent)]
    multirun = [] if only_shows(parse_command_line(rest)) else ["--multirun"]
    return [*location, "--config-name", path.stem, *multirun, *rest]


def main(argv: list[str]) -> int:
    if not argv:  # a missing argument: one line, exit 2, as every verb's (it printed the usage, exit 0)
        print(
            f"error: scaling sweep: name a sweep ({available_sweeps()}) or a sweep file; see scaling sweep --help",
            file=sys.stderr,
        )
        return 2
    if argv[0] in ("-h", "--help"):
        print(
            "usage: scaling sweep NAME_OR_FILE [key=value ...] [hydra/launcher=joblib|submitit_local|slurm]\n"
            "       scaling sweep NAME_OR_FILE --cfg job|hydra   (print the composed config, launch nothing)\n"
            f"sweeps: {available_sweeps()}\nprogress of a running or finished sweep: scaling status results/NAME"
        )
        return 0
    from scaling.train_app import precheck, run_hydra_reporting_writes

    path = resolve_sweep(argv[0])
    check_not_shadowed(path)
    check_grid_keys(path)
    if proposes_nothing(path, argv[1:]):
        print(f"sweep {path}: no runs to launch (its grid, budgets and models are empty)", file=sys.stderr)
        return 0
    command_line = hydra_command_line(path, argv[1:])
    return run_hydra_reporting_writes("scaling sweep", command_line, "hydra.sweep.dir", precheck(command_line))
