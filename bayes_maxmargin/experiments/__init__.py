"""Paper reproductions that the installed ``bmm`` command can run.

Each experiment is a function returning ``(rows, table)``: one dict per row of the paper's table
(our numbers next to the paper's) and the same as a markdown table. :func:`run` is the entry the
``bmm`` command calls when the configuration has an ``experiment`` node (``bmm
+experiment=henao_table1``, ``bmm +experiment=luts_spam``, ...); the node names the experiment and
holds its settings (``bayes_maxmargin/configs/experiment/*.yaml``).

===================  ==================================================================
``henao_table1``     :func:`~bayes_maxmargin.experiments.henao2014.table1`
``henao_table2``     :func:`~bayes_maxmargin.experiments.henao2014.table2`
``henao_table3``     :func:`~bayes_maxmargin.experiments.henao2014_factor.table3`
``luts_simulation``  :func:`~bayes_maxmargin.experiments.luts2014.simulation` (Sec. 4.2)
``luts_toenail``     :func:`~bayes_maxmargin.experiments.luts2014.toenail` (Sec. 4.3)
``luts_spam``        :func:`~bayes_maxmargin.experiments.luts2014.spam` (Sec. 4.4)
``luts_acath``       :func:`~bayes_maxmargin.experiments.luts2014.acath` (Sec. 4.5)
``wenzel_table1``    :func:`~bayes_maxmargin.experiments.wenzel2017.table1`
``chen_table3``      :func:`~bayes_maxmargin.experiments.chen2015.table3`
``chen_table4``      :func:`~bayes_maxmargin.experiments.chen2015.table4`
===================  ==================================================================
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

from ..io import write_json, write_text
from . import chen2015, henao2014, henao2014_factor, luts2014, wenzel2017

__all__ = ["EXPERIMENTS", "chen2015", "henao2014", "henao2014_factor", "luts2014", "machine_info", "run",
           "wenzel2017"]

#: Experiment name -> ``function(**settings)`` -> (rows, markdown table).
EXPERIMENTS = {
    "henao_table1": henao2014.table1,
    "henao_table2": henao2014.table2,
    "henao_table3": henao2014_factor.table3,
    "luts_simulation": luts2014.simulation,
    "luts_toenail": luts2014.toenail,
    "luts_spam": luts2014.spam,
    "luts_acath": luts2014.acath,
    "wenzel_table1": wenzel2017.table1,
    "chen_table3": chen2015.table3,
    "chen_table4": chen2015.table4,
}


def machine_info() -> dict[str, Any]:
    """CPU model, core count, load average, accelerator and library versions of this run."""
    import jax
    import sklearn

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_1_5_15min": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "scikit-learn": sklearn.__version__,
        "backend": jax.default_backend(),
        "devices": [d.device_kind for d in jax.devices()],
    }


def _settings(experiment: Any) -> dict[str, Any]:
    """The experiment node as a plain dict without its ``name``."""
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(experiment, DictConfig):
            experiment = OmegaConf.to_container(experiment, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf ships with hydra, a dependency
        pass
    settings = dict(experiment)
    settings.pop("name", None)
    return settings


def run(cfg: Any, output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Run the experiment named by ``cfg.experiment.name`` and write its outputs.

    Parameters
    ----------
    cfg : DictConfig or Mapping
        The ``bmm`` configuration; ``cfg.experiment`` holds ``name`` (a key of
        :data:`EXPERIMENTS`) and the keyword arguments of that experiment's function.
    output_dir : path
        Folder that receives ``results.json`` (settings, rows, table, machine, wall time) and
        ``table.md``.

    Returns
    -------
    dict
        ``experiment``, ``table`` (markdown), ``wall_time_s``, ``n_rows``, ``output_dir`` and, per
        row, the measured errors and balanced error rates (columns ``*_error`` and ``*_ber``) as
        ``<row>/<column>`` keys (fractions in [0, 1]).

    Raises
    ------
    ValueError
        If the experiment name is unknown.
    """
    experiment = cfg["experiment"] if isinstance(cfg, dict) else cfg.experiment
    name = experiment["name"] if isinstance(experiment, dict) else experiment.name
    if name not in EXPERIMENTS:
        raise ValueError(f"Unknown experiment {name!r}; valid experiments are {', '.join(EXPERIMENTS)}")
    settings = _settings(experiment)
    t0 = time.perf_counter()
    rows, table = EXPERIMENTS[name](**settings)
    wall = time.perf_counter() - t0
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "experiment": name,
        "settings": settings,
        "rows": rows,
        "table": table,
        "wall_time_s": wall,
        "machine": machine_info(),
    }
    write_json(output_dir / "results.json", payload, default=float)
    write_text(output_dir / "table.md", table + "\n")
    metrics: dict[str, Any] = {
        "experiment": name,
        "table": table,
        "wall_time_s": wall,
        "n_rows": len(rows),
        "output_dir": str(output_dir),
    }
    for row in rows:
        for key, value in row.items():
            if key.endswith(("_error", "_ber")) and not key.startswith("paper_") and isinstance(value, float):
                metrics[f"{row['key']}/{key}"] = value
    return metrics
