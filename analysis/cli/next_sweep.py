"""The sweep file `scaling next` writes for a results store (or --ladder-shapes): the source's sweep file with its
grid replaced by the proposal, its store and the settings its runs share (`next_settings`), and where the source is
a hyperparameter sweep (`next_limits.per_point`: K runs a point), the axes that sweep the K settings per point."""

from __future__ import annotations

import math
from pathlib import Path

from analysis.cli.next_out import BARE, counted, short


def sweep_yaml(base: dict, plan, args, aim: tuple[float, str], per) -> str:
    """The source's sweep file with its grid replaced by the proposal (budget -> shapes), its store the source's
    (user24: a sweep file of the user's was replaced by a bare one whose runs went to results/next, with other
    settings, under a header saying they would join the source's store). ``aim``: (the target budget, the
    expected width as said); ``per``: the runs a point costs (`next_limits.PerPoint`), swept by the axes the
    source's file has or its runs' configs show (`next_settings.swept_axes`)."""
    import yaml

    from analysis.cli.next_settings import base_sweep_path, carried, merged, nested, swept_axes

    grid: dict[str, list[str]] = {}
    for c in plan.runs:
        grid.setdefault(short(c.budget), []).append(c.shape)
    store = Path(args.source).is_dir()  # a results store (a table's runs have none to join)
    named = base.get("sweep") != BARE
    own = carried(args.source, base_sweep_path(args.source) if named else None) if store else {}  # user26: llama
    sweep = merged({**base, **({"store": str(Path(args.source).resolve())} if store else {})}, nested(own or {}))
    sweeper = {**base.get("hydra", {}).get("sweeper", {}), "grid": grid}
    found = swept_axes(args.source, sweeper) if store and per.runs > 1 else {}
    sweeper.update(found)  # user: a 5-LR sweep's proposal trained one LR a point
    # no runs: nothing the file could launch (user26: an empty grid let the base file's budgets × models train)
    sweeper.update({} if plan.runs else {"budgets": [], "models": []})
    sweep["hydra"] = {**base.get("hydra", {}), "sweeper": sweeper}
    header = (
        f"# written by `scaling next {args.source} --flops {short(args.flops)}`: {counted(len(plan.runs), per.runs)}, "
        f"{plan.flops * per.runs:.4g} FLOPs,\n# chosen to narrow N_opt at {aim[0]:.4g} FLOPs (expected width "
        f"{aim[1]}).\n# {settings_said(args, base, store, named, own)}\n"
    )
    header += f"# {axes_said(per, sweeper, found, store)}\n" if per.runs > 1 else ""
    return header + yaml.safe_dump(sweep, sort_keys=False)


def settings_said(args, base: dict, store: bool, named: bool, own: dict | None) -> str:
    """Where the file's settings come from, as its header says it."""
    from analysis.cli.next_settings import base_sweep_path

    if not store:
        return "A table's runs have no store or settings to join: set store= and your runs' settings here"
    where = f"The source's sweep file ({base_sweep_path(args.source)})" if named else "A bare sweep file"
    where += "" if named else " (the source's is unknown)"
    if own is None:
        return (
            f"{where}: no run's config.yaml was found, so its runs' settings are unknown: set them here (model.arch, "
            "data, train.*), or the runs will differ from the store's"
        )
    shared = ", ".join(f"{k}={v}" for k, v in own.items()) or "none"
    return f"{where}, its store, and the settings its runs share that the file lacks ({shared}, from their config.yaml): scaling sweep FILE"


def axes_said(per, sweeper: dict, found: dict, store: bool) -> str:
    """How the file sweeps a point's K settings (``per``): the axes in ``sweeper`` (``found``: those its runs'
    configs gave) and the runs a point they make; or, where it has none, what the user must add."""
    from analysis.cli.next_settings import AXES

    axes = {axis: sweeper[axis] for axis in AXES if sweeper.get(axis)}
    if not axes:
        where = "its sweep file or its runs' configs" if store else "a table's rows (its settings are its own models')"
        return (
            f"{per.note}, but no sweeper axis of them was found in {where}: set hydra.sweeper.lr_multipliers (or "
            "lr_grid, batch_sizes, warmup_fracs) here, or `scaling sweep` trains one run a point"
        )
    said = "; ".join(f"hydra.sweeper.{axis} {list(values)}" for axis, values in axes.items())
    k = math.prod(len(values) for values in axes.values())
    source = " (from its runs' configs)" if found else ""
    refine = ", and lr_refine adds midpoints around each best LR" if sweeper.get("lr_refine") else ""
    differs = "" if refine or k == per.runs else f" (not the table's {per.runs}: check them)"
    return f"{per.note}: {said}{source} sweep{'s' * (len(axes) == 1)} {k} runs a point{differs}{refine}"
