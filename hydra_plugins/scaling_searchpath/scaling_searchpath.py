"""Puts the project's `conf/` and `sweeps/` on Hydra's config search path.

So a sweep file in `sweeps/` is a primary config (``--config-name quick``) that builds on
`conf/config.yaml` (``defaults: [config, ...]``), from any working directory.
"""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

ROOT = Path(__file__).resolve().parents[2]


class ScalingSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for folder in ("conf", "sweeps"):
            search_path.append(provider="scaling", path=f"file://{ROOT / folder}")
