"""`scaling train`: one run as a Hydra app (every config key is an override: budget=3e12 model=d128).

Before Hydra takes over, the overrides are composed and the run is planned once here, so that an
unknown key, a wrong type, an unknown model name or an impossible budget is reported as one line
naming the key and what is valid, before any compute is spent or any file is written; the run then
trains with that plan. In a sweep, each job trains with the plan the sweeper made (config ``plan``).

Exit status of `scaling train` (a single run):
  0    the run completed, or had already completed (or another process is training it)
  1    the run ended errored (out of memory, a full disk, a bug: recorded as failed, a relaunch
       retries it), or its record or Hydra's output could not be written (one `error:` line)
  2    bad input: one `error:` line naming the key, file or value; nothing written
  3    the run diverged (recorded as failed; final: a relaunch leaves it), now or before
  130  interrupted by Ctrl-C (143: SIGTERM): a checkpoint was saved, a relaunch resumes; after a
       second Ctrl-C one line says whether an earlier checkpoint is kept
In a sweep (`scaling sweep`, --multirun) a run that fails is recorded and the sweep goes on; the
sweep's own exit status (1 when a run failed) is in scaling/sweep_app.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import hydra
import hydra.errors
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

import scaling.config  # noqa: F401  (registers the schema with Hydra's ConfigStore)
from scaling.config import schema_keys, valid_keys_hint
from scaling.errors import ConfigError, UserError

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")
EXIT_ERRORED, EXIT_BAD_INPUT, EXIT_DIVERGED = 1, 2, 3
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a tool killed by a closed pipe

# The plan `precheck` made of a single run, keyed by its resolved config: the run trains with it.
_PRECHECKED: dict[str, object] = {}


def explain_compose_error(err: Exception, overrides: list[str]) -> str:
    """One line out of Hydra/OmegaConf's multi-line composition errors."""
    parts, append = [], ""
    e: BaseException | None = err
    while e is not None:
        for line in str(e).splitlines():
            line = line.strip()
            append = append or (line if line.startswith("To append") else "")
            if (
                line
                and not line.startswith(("Set the environment", "object_type", "reference_type", "To append"))
                and line not in parts
                and "$VALUE" not in line  # OmegaConf's unfilled template of the line before
                and not line.startswith(("Config search path:", "provider="))  # Hydra's search path
            ):
                parts.append(line)
        e = e.__cause__ or e.__context__
    text = "; ".join(parts)
    if "Available options" in text or "Could not find" in text:
        return f"{text}. (config group options are the files in conf/<group>/)"
    hint = _hint(text) or _list_hint(text, overrides)
    # Hydra's "To append to your config use +key" is right for a free dict (model.kwargs, hydra.job.env_set);
    # where a hint applies (a typed section, a key of another option), the added key would never be read
    if append and not hint:
        text = f"{text}; {append}"
    return (
        f"{text}{hint} (overrides given: {' '.join(overrides) or 'none'}; see `scaling train --cfg job` for valid keys)"
    )


def _hint(text: str) -> str:
    """What a user meant, for errors whose words mislead: a key of another option of a config group
    (``data.path`` with the default data=stdlib: Hydra suggests ``+data.path``), a typo in a typed
    section (the close key and the valid ones, not Hydra's ``+key``), and a numeric key such as a
    grid's budget ``3e11``, which Hydra's override grammar cannot address."""
    import re

    key = re.search(r"full_key: (\w+)\.([\w.]+)", text)
    if "not in struct" in text and key and (Path(CONF_DIR) / key[1]).is_dir():
        group, rest = key[1], key[2]
        having = sorted(f.stem for f in (Path(CONF_DIR) / group).glob("*.yaml") if _has_key(f, rest))
        if having:
            options = ", ".join(f"{group}={h}" for h in having)
            return (
                f" [{group}.{rest} belongs to {options}: choose one first, e.g. {group}={having[0]} {group}.{rest}=...]"
            )
    unknown = re.search(r"Key '\w+' not in '(\w+)'; full_key: ((?:\w+\.)*)(\w+)", text)
    valid = _section_keys(unknown[2].rstrip(".")) if unknown else None
    if valid and unknown[2] == "hydra.sweeper." and unknown[1] != "ScalingSweeperConf" and unknown[3] in valid:
        return (  # user19: "Key 'budgets' not in 'BasicSweeperConf' [did you mean budgets?]"
            f" [hydra.sweeper.{unknown[3]} is a setting of the scaling sweeper, which this config does not use: add "
            "`- override hydra/sweeper: scaling` to the sweep file's defaults]"
        )
    if valid:  # a typo in a typed section (Hydra's advice, `+key`, would add a key nothing reads)
        return f" [{valid_keys_hint(unknown[3], valid, unknown[2].rstrip('.'))}]"
    grouped = re.search(r"Could not override '(\w+)'\. No match in the defaults list", text)
    if grouped and grouped[1] in (schema_keys("") or []):  # a plain key that a directory made a group
        return (
            f" [a directory named {grouped[1]!r} beside the sweep file is read as a config group (Hydra searches "
            "the sweep file's directory): keep the sweep file where no such directory is]"
        )
    if "Error parsing override" in text and re.search(r"extraneous input 'e\d+'", text):
        return " [a numeric key such as a grid's budget 3e11 cannot be set on the command line: write a sweep .yaml]"
    return ""


def _list_hint(text: str, overrides: list[str]) -> str:
    """A list key given values without brackets (``hydra.sweeper.models=d32,d64``): Hydra reads that as a sweep
    over the values, one at a time, and its error names the first value only."""
    import re

    key = re.search(r"is not a ListConfig, list or tuple.*full_key: ([\w.]+)", text)
    if not key:
        return ""
    given = [o.split("=", 1)[1] for o in overrides if "=" in o and o.split("=", 1)[0].lstrip("+~") == key[1]]
    if given and "," in given[0] and not given[0].startswith("["):
        return f" [{key[1]} takes a list: write {key[1]}=[{given[0]}] (values with commas and no brackets are a sweep)]"
    return f" [{key[1]} takes a list: write {key[1]}=[...]]"


def _section_keys(section: str) -> list[str] | None:
    """The keys of the config section ``section`` from its schema (the sweeper's for hydra.sweeper)."""
    if section == "hydra.sweeper":
        from hydra_plugins.scaling_sweeper import settings

        return settings.keys()
    return None if section.startswith("hydra") else schema_keys(section)


def _has_key(path: Path, key: str) -> bool:
    """Whether the YAML file ``path`` has the dotted ``key``, even as a required value (``???``)."""
    node = OmegaConf.to_container(OmegaConf.load(path))
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def compose_config(
    overrides: list[str],
    config_name: str = "config",
    extra_dir: str | None = None,
    with_hydra: bool = False,
    given: list[str] | None = None,
) -> DictConfig:
    """Compose the config as Hydra would (conf/ and sweeps/ are on the search path, plus
    ``extra_dir`` for a sweep file kept elsewhere), raising ConfigError with one line on failure.
    ``with_hydra`` also composes (and so checks) the ``hydra`` section: launcher, sweeper. ``given``: the
    command line's overrides, which the message names, when ``overrides`` are their first values."""
    try:
        with initialize_config_dir(config_dir=extra_dir or CONF_DIR, version_base="1.3"):
            return compose(config_name=config_name, overrides=overrides, return_hydra_config=with_hydra)
    except Exception as err:  # Hydra/OmegaConf raise many types; all are bad input here
        raise ConfigError(explain_compose_error(err, given or overrides)) from None


def parse_command_line(argv: list[str]) -> argparse.Namespace:
    """Hydra's own reading of a command line: flags (--multirun, --cfg job, --config-name quick) and overrides.

    Hydra 1.3 has no public parser of its command line (the flags are read inside hydra.main); copying
    its flags into a parser of ours would make two definitions that drift apart, so this is the one
    use of the private ``hydra._internal.utils.get_args_parser``. tests/test_sweeps.py's
    test_hydras_command_line_parser_still_reads_the_flags_the_cli_uses fails if it changes."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser().parse_args(argv)


def only_shows(args: argparse.Namespace) -> bool:
    """True when the command line asks Hydra to print something (config, help, info), not to run."""
    return bool(args.cfg or args.info or args.help or args.hydra_help or args.shell_completion)


def unquoted_non_ascii(overrides: list[str]) -> str | None:
    """The message for an override whose unquoted value has a character Hydra's override grammar
    does not take (``store=résultats``: its lexer error would follow), or None."""
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and not value.isascii() and value[:1] not in "\"'":
            return (
                f"{override}: a value with non-ASCII characters must be quoted for Hydra; "
                f"write '{key}=\"{value}\"' (the single quotes are for the shell)"
            )
    return None


def first_values(overrides: list[str]) -> list[str]:
    """Each swept override (``budget=1e11,3e11``, ``seed=range(3)``) replaced by its first value, so
    that one composition checks every key and every value's type before a multirun starts."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:
        raise ConfigError(unquoted_non_ascii(overrides) or explain_compose_error(err, overrides)) from None
    firsts = []
    for override in parsed:
        if not override.is_sweep_override():
            firsts.append(override.input_line)
            continue
        try:  # glob(...) sweeps need the config loader to expand: left to Hydra
            firsts.append(f"{override.get_key_element()}={next(iter(override.sweep_string_iterator()))}")
        except Exception:
            continue
    return firsts


def override_key(override: str) -> str:
    """The key a command-line override names: ``+a.b=1``, ``++a.b=1``, ``~a.b`` and ``a.b=1,2`` all name a.b."""
    return override.lstrip("+~").split("=", 1)[0]


def precheck(argv: list[str]) -> list[Path]:
    """Before Hydra takes over: compose what the command line asks for, Hydra section included,
    and plan a single run, so that an unknown key, a wrong type, an unknown launcher or model, or
    an impossible budget is one line naming it (exit 2) instead of a traceback. A multirun is
    composed with its swept keys' first values; its impossible combinations are the sweeper's to drop.
    Returns the store directories it created (`scaling.store.check_writable_store`)."""
    from omegaconf import open_dict

    from scaling.plan import check_settings_used, plan_run, repeats_unasked
    from scaling.store import check_writable_store

    args = parse_command_line(argv)
    if args.multirun and only_shows(args):
        raise ConfigError(
            "--cfg/--info cannot be combined with --multirun (Hydra shows the config of one job); drop --multirun"
        )
    if (
        args.help
        or args.hydra_help
        or args.info
        or args.shell_completion
        or args.experimental_rerun
        or args.config_path
    ):
        return []  # nothing to compose, or a config location only Hydra resolves
    cfg = compose_config(
        first_values(args.overrides),
        config_name=args.config_name or "config",
        extra_dir=args.config_dir,
        with_hydra=True,
        given=args.overrides,
    )
    if any(override_key(o) == "train.batch_size" for o in args.overrides):
        from scaling.hparams import check_batch_not_set, law_of

        check_batch_not_set(cfg, law_of(cfg), "train.batch_size")
    if args.multirun:
        from hydra_plugins.scaling_sweeper.layout import check_launcher

        check_launcher(cfg.hydra.launcher)
    elif not args.cfg:
        with open_dict(cfg):
            del cfg["hydra"]
        check_settings_used(cfg)
        _PRECHECKED[_config_key(cfg)] = plan = plan_run(cfg)
        from scaling.machine import check_threads
        from scaling.train import preflight  # torch: only for a run about to train

        check_threads(cfg.train.threads)  # here, and in a sweep whose jobs run on this machine (`check_jobs_here`)
        preflight(cfg)
        if why := repeats_unasked(cfg, plan):
            raise ConfigError(f"train.allow_repeat: budget {cfg.budget:.3g} (model {plan.shape.name}) {why}")
        from scaling.hparams import law_of, law_warnings

        for line in law_warnings(cfg, law_of(cfg)):
            print(f"warning: {line}", file=sys.stderr)
    return [] if args.cfg else check_writable_store(cfg.store)


def _config_key(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)


def _single_run() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN


def run_task(cfg: DictConfig) -> float | None:
    """The Hydra task: train one run. A bad config is one line on stderr and exit status 2; a single
    run that ends failed exits with the status of the module's table (a sweep's job returns)."""
    from scaling.devices import claim_slot
    from scaling.plan import planned
    from scaling.record import RecordNotWritten
    from scaling.store import Failure, record_failure
    from scaling.train import train

    try:
        with claim_slot(cfg.store, cfg.train.device_slots) as slot:  # a sweep on GPUs: one device slot per run
            if cfg.get("pack"):  # a sweep's packed job (hydra.sweeper.pack): its first run's record stands for it
                from scaling.packed_store import train_packed_job

                record = next(iter(train_packed_job(cfg)), None)
            else:
                record = train(cfg, plan=_PRECHECKED.pop(_config_key(cfg), None) or planned(cfg), slot=slot)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except RecordNotWritten as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(EXIT_ERRORED) from None
    if cfg.sweep and (Path(cfg.store) / "sweep.json").exists():
        from scaling.progress import print_after_run

        print_after_run(Path(cfg.store))
    failure = Failure.NONE if record is None else record_failure(record)
    if failure != Failure.NONE and _single_run():
        reason = str(record["reason"])  # a divergence's reason begins "diverged: ..." itself
        ended = reason if reason.startswith(str(failure)) else f"{failure}: {reason}"
        print(f"error: run {record['run_id']} {ended}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_DIVERGED if failure == Failure.DIVERGED else EXIT_ERRORED)
    return None if record is None else record["val_loss"]


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> float | None:
    from hydra_plugins.scaling_sweeper.processes import watch_sweep

    watch_sweep()  # in a sweep's local worker: end with the sweep's process (a no-op elsewhere)
    return run_task(cfg)


def run_hydra(prog: str, argv: list[str]) -> None:
    """Run the Hydra app on ``argv`` (overrides and Hydra's flags) as its command line.

    hydra.main reads ``sys.argv``, and Hydra 1.3 has no public way to hand it arguments:
    ``initialize_config_dir`` + ``compose`` (public, used by `compose_config`) compose a config but run
    no sweeper or launcher, so they cannot run a multirun. So this is the one place where sys.argv is
    set, for the call only. tests/test_sweeps.py's test_run_hydra_hands_hydra_its_command_line fails
    if hydra.main stops reading it."""
    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        hydra_main()
    finally:
        sys.argv = saved


def run_hydra_reporting_writes(prog: str, argv: list[str], output_dir_key: str, created: list[Path]) -> int:
    """`run_hydra`, with a write that fails (a full or read-only disk under the store or Hydra's
    output directory ``output_dir_key``) reported as one `error:` line and exit status 1. Bad input
    found after `precheck` (a sweep setting the sweeper refuses: exit 2) takes back the store
    directories precheck ``created``, while they are still empty (`scaling.store.remove_created`).

    Hydra prints its own traceback for an exception and exits 1; with HYDRA_FULL_ERROR it raises it
    instead, so that the error reaches this handler."""
    from scaling.store import remove_created

    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        run_hydra(prog, argv)
    except SystemExit as end:
        if end.code == EXIT_BAD_INPUT:
            remove_created(created)
        raise
    except UserError:
        remove_created(created)
        raise
    except hydra.errors.ConfigCompositionException as err:  # what precheck could not see (a directory it made)
        remove_created(created)
        raise ConfigError(explain_compose_error(err, argv)) from None
    except BrokenPipeError:  # stdout closed early (`| head`): not a disk to free (user26); quiet, as SIGPIPE ends tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes it
        return EXIT_BROKEN_PIPE
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        print(
            f"error: cannot write {where}{err.strerror or err}; free space (or give another store= or "
            f"{output_dir_key}=) and relaunch: what is finished is kept",
            file=sys.stderr,
        )
        return EXIT_ERRORED
    return 0


def main(argv: list[str]) -> int:
    return run_hydra_reporting_writes("scaling train", argv, "hydra.run.dir", precheck(argv))
