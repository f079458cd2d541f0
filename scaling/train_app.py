"""`scaling train`: one run as a Hydra app (every config key is an override: budget=3e12 model=d128).

Before Hydra takes over, the overrides are composed and the run is planned once here, so that an
unknown key, a wrong type, an unknown model name or an impossible budget is reported as one line
naming the key and what is valid, before any compute is spent.
"""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

import scaling.config  # noqa: F401  (registers the schema with Hydra's ConfigStore)
from scaling.errors import ConfigError, UserError

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")
HYDRA_FLAGS = ("-", "hydra.", "hydra/")


def explain_compose_error(err: Exception, overrides: list[str]) -> str:
    """One line out of Hydra/OmegaConf's multi-line composition errors."""
    parts = []
    e: BaseException | None = err
    while e is not None:
        for line in str(e).splitlines():
            line = line.strip()
            if line and not line.startswith(("Set the environment", "object_type", "reference_type")) and line not in parts:
                parts.append(line)
        e = e.__cause__ or e.__context__
    text = "; ".join(parts)
    if "Available options" in text or "Could not find" in text:
        return f"{text}. (config group options are the files in conf/<group>/)"
    return f"{text} (overrides given: {' '.join(overrides) or 'none'}; see `scaling train --cfg job` for valid keys)"


def compose_config(overrides: list[str], config_name: str = "config", extra_dir: str | None = None) -> DictConfig:
    """Compose the config as Hydra would (conf/ and sweeps/ are on the search path, plus
    ``extra_dir`` for a sweep file kept elsewhere), raising ConfigError with one line on failure."""
    try:
        with initialize_config_dir(config_dir=extra_dir or CONF_DIR, version_base="1.3"):
            return compose(config_name=config_name, overrides=overrides)
    except Exception as err:  # Hydra/OmegaConf raise many types; all are bad input here
        raise ConfigError(explain_compose_error(err, overrides)) from None


def precheck(overrides: list[str]) -> None:
    from scaling.plan import plan_run

    plan_run(compose_config([o for o in overrides if not o.startswith(HYDRA_FLAGS)]))


def run_task(cfg: DictConfig) -> float | None:
    """The Hydra task: train one run; a bad config is one line on stderr and exit status 2."""
    from scaling.train import train

    try:
        record = train(cfg)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2)
    if cfg.sweep and (Path(cfg.store) / "sweep.json").exists():
        from scaling.progress import format_progress
        print(format_progress(Path(cfg.store)), flush=True)
    return None if record is None else record["val_loss"]


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> float | None:
    return run_task(cfg)


def main(argv: list[str]) -> int:
    if not any(a in ("--help", "-h", "--hydra-help", "--info") or a.startswith("--cfg") for a in argv):
        precheck(argv)
    sys.argv = ["scaling train", *argv]
    hydra_main()
    return 0
