"""The house rules that a careless change would break silently: data flows one way through
analysis/ (a package imports only from those before it), the analysis never imports torch, and
modules and functions stay small enough to read in one sitting."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ["published", "sources", "fits", "synthetic", "describe", "compare", "figures", "report", "cli"]
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def _stage(path: Path) -> str:
    return path.relative_to(ROOT / "analysis").parts[0].removesuffix(".py")


def test_analysis_imports_only_from_earlier_stages():
    rank = {name: i for i, name in enumerate(ORDER)}
    backwards = []
    for path in (ROOT / "analysis").rglob("*.py"):
        me = _stage(path)
        if me not in rank:
            continue
        for dep in re.findall(r"^\s*from analysis\.(\w+)", path.read_text(), re.M):
            if dep in rank and rank[dep] > rank[me]:
                backwards.append(f"{path.relative_to(ROOT)} imports analysis.{dep}")
    assert not backwards, backwards


def test_analysis_never_imports_torch():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "analysis").rglob("*.py")
        if re.search(r"^\s*(import torch|from torch)", p.read_text(), re.M)
    ]
    assert not offenders, offenders


def test_modules_and_functions_stay_readable():
    too_long = []
    for package in ("scaling", "analysis", "hydra_plugins"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            if text.count("\n") > MAX_MODULE_LINES:
                too_long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        too_long.append(f"{path.relative_to(ROOT)}::{node.name}: {length} lines")
    assert not too_long, too_long
