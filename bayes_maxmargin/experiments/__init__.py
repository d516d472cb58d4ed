"""Paper reproductions that the installed ``bmm`` command can run.

Each experiment is a function returning ``(rows, table)``: one dict per row of the paper's table
(our numbers next to the paper's) and the same as a markdown table. :func:`run` is the entry the
``bmm`` command calls when the configuration has an ``experiment`` node (``bmm
+experiment=henao_table1``, ``bmm +experiment=luts_spam``, ...); the node names the experiment and
holds its settings (``bayes_maxmargin/configs/experiment/*.yaml``). Every run writes to its folder

* ``table.md``: the paper's numbers beside ours (the experiment's markdown table);
* ``results.json``: settings, rows, table, machine and wall time;
* ``folds.csv`` and ``folds.json``: one record per dataset x method x fold / split / replicate
  (:data:`FOLD_COLUMNS` first: the measured ``error`` as a fraction, what it measures in
  ``metric``, the fit ``time_s``, the paper's number where it reports one; then the experiment's
  own fields), from the experiment's :data:`FOLDS` function;
* the figures of :data:`FIGURES` as PNG (:mod:`~bayes_maxmargin.experiments.figures`);
* ``config.yaml``: the resolved run configuration.

``bmm +experiment=NAME smoke=true`` is a smoke run: the function's ``quick`` settings made smaller
by the ``${smoke:<full>,<smoke>}`` values of the experiment's yaml (one small dataset, two folds,
a few iterations; every method and output still runs), seconds instead of hours, labelled
``SMOKE RUN`` at the top of ``table.md``. Its numbers are not a reproduction. ``bmm --multirun
+experiment=NAME seed=0,1,2`` sweeps (Hydra's basic launcher, one folder per job).

===================  ==================================================================
``henao_table1``     :func:`~bayes_maxmargin.experiments.henao2014.table1`
``henao_table2``     :func:`~bayes_maxmargin.experiments.henao2014.table2`
``henao_table3``     :func:`~bayes_maxmargin.experiments.henao2014_factor.table3`
``luts_simulation``  :func:`~bayes_maxmargin.experiments.luts2014.simulation` (Sec. 4.2)
``luts_toenail``     :func:`~bayes_maxmargin.experiments.luts2014.toenail` (Sec. 4.3)
``luts_spam``        :func:`~bayes_maxmargin.experiments.luts2014.spam` (Sec. 4.4)
``luts_acath``       :func:`~bayes_maxmargin.experiments.luts2014.acath` (Sec. 4.5)
``wenzel_table1``    :func:`~bayes_maxmargin.experiments.wenzel2017.table1`
``wenzel_susy``      :func:`~bayes_maxmargin.experiments.wenzel2017_figs.susy` (Sec. 5.2)
``wenzel_fig1``      :func:`~bayes_maxmargin.experiments.wenzel2017.fig1` (Sec. 5.3)
``wenzel_fig2``      :func:`~bayes_maxmargin.experiments.wenzel2017_figs.fig2` (Sec. 5.4)
``wenzel_fig3``      :func:`~bayes_maxmargin.experiments.wenzel2017_figs.fig3` (Sec. 5.5)
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

from bayes_maxmargin.core.io import write_config, write_json, write_text
from bayes_maxmargin.experiments import chen2015, henao2014, henao2014_factor, luts2014, wenzel2017, wenzel2017_figs
from bayes_maxmargin.experiments.figures import save_figure

__all__ = ["EXPERIMENTS", "FIGURES", "FOLDS", "FOLD_COLUMNS", "SMOKE_BANNER", "chen2015", "henao2014",
           "henao2014_factor", "luts2014", "machine_info", "run", "wenzel2017", "wenzel2017_figs", "write_folds"]

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
    "wenzel_susy": wenzel2017_figs.susy,
    "wenzel_fig1": wenzel2017.fig1,
    "wenzel_fig2": wenzel2017_figs.fig2,
    "wenzel_fig3": wenzel2017_figs.fig3,
    "chen_table3": chen2015.table3,
    "chen_table4": chen2015.table4,
}

#: Experiment name -> function(rows) -> per-fold records (dicts with at least :data:`FOLD_COLUMNS`
#: but ``experiment``).
FOLDS = {
    "henao_table1": henao2014.table1_folds,
    "henao_table2": henao2014.table2_folds,
    "henao_table3": henao2014_factor.table3_folds,
    "luts_simulation": luts2014.split_folds,
    "luts_toenail": luts2014.split_folds,
    "luts_spam": luts2014.spam_folds,
    "luts_acath": luts2014.split_folds,
    "wenzel_table1": wenzel2017.table1_folds,
    "wenzel_susy": wenzel2017_figs.susy_folds,
    "wenzel_fig1": wenzel2017.fig1_folds,
    "wenzel_fig2": wenzel2017_figs.fig2_folds,
    "wenzel_fig3": wenzel2017_figs.fig3_folds,
    "chen_table3": chen2015.table3_folds,
    "chen_table4": chen2015.table4_folds,
}

#: Experiment name -> function(rows, records) -> {file name: matplotlib Figure}.
FIGURES = {
    "henao_table1": henao2014.table1_figures,
    "henao_table2": henao2014.table2_figures,
    "henao_table3": henao2014_factor.table3_figures,
    "luts_simulation": luts2014.realdata_figures,
    "luts_toenail": luts2014.realdata_figures,
    "luts_spam": luts2014.spam_figures,
    "luts_acath": luts2014.realdata_figures,
    "wenzel_table1": wenzel2017.table1_figures,
    "wenzel_susy": wenzel2017_figs.susy_figures,
    "wenzel_fig1": wenzel2017.fig1_figures,
    "wenzel_fig2": wenzel2017_figs.fig2_figures,
    "wenzel_fig3": wenzel2017_figs.fig3_figures,
    "chen_table3": chen2015.table3_figures,
    "chen_table4": chen2015.table4_figures,
}

#: Leading columns of ``folds.csv``: ``error`` is a fraction in [0, 1] of the kind ``metric`` names
#: ("error": misclassification rate; "ber": balanced error rate), empty where the experiment measures
#: no error (``luts_spam``: inclusion probabilities; ``chen_table4``: times).
FOLD_COLUMNS = ("experiment", "dataset", "method", "fold", "metric", "error", "paper_error", "time_s")

#: First line of a smoke run's ``table.md``.
SMOKE_BANNER = ("> **SMOKE RUN** (`smoke=true`): tiny settings that exercise every step of the experiment in "
                "seconds. These numbers are NOT a reproduction of the paper.")


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
    """The experiment node as a plain dict without its ``name`` (interpolations resolved)."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(experiment, DictConfig):
        experiment = OmegaConf.to_container(experiment, resolve=True)
    settings = dict(experiment)
    settings.pop("name", None)
    return settings


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, (list, tuple, dict)):
        import json

        return json.dumps(value, default=float)
    return str(value)


def write_folds(records: list[dict[str, Any]], output_dir: str | os.PathLike[str]) -> list[str]:
    """Write per-fold records as ``folds.csv`` and ``folds.json`` (atomically).

    The columns are :data:`FOLD_COLUMNS`, then every other key in the order first seen; a record
    without a column leaves it empty (CSV) or null (JSON); None and NaN are empty cells.

    Returns
    -------
    list of str
        The columns.
    """
    import csv
    import io

    columns = list(FOLD_COLUMNS)
    for rec in records:
        columns += [k for k in rec if k not in columns]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for rec in records:
        writer.writerow([_cell(rec.get(c)) for c in columns])
    output_dir = Path(output_dir)
    write_text(output_dir / "folds.csv", buf.getvalue())
    write_json(output_dir / "folds.json", [{c: rec.get(c) for c in columns} for rec in records], default=float)
    return columns


def _node(cfg: Any, key: str, default: Any = None) -> Any:
    getter = getattr(cfg, "get", None)
    return getter(key, default) if getter is not None else default


def run(cfg: Any, output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Run the experiment named by ``cfg.experiment.name`` and write its outputs.

    Parameters
    ----------
    cfg : DictConfig or Mapping
        The ``bmm`` configuration; ``cfg.experiment`` holds ``name`` (a key of
        :data:`EXPERIMENTS`) and the keyword arguments of that experiment's function; ``cfg.smoke``
        (default False) runs it with ``quick=True`` (the experiment's yaml also shrinks its
        settings then) and labels ``table.md`` as a smoke run.
    output_dir : path
        Folder that receives ``table.md``, ``results.json`` (settings, rows, table, machine, wall
        time), ``folds.csv`` and ``folds.json`` (:func:`write_folds`), the experiment's figures
        (PNG) and ``config.yaml`` (the resolved configuration).

    Returns
    -------
    dict
        ``experiment``, ``smoke``, ``table`` (markdown), ``wall_time_s``, ``n_rows``, ``n_folds``
        (records), ``figures`` (file names), ``output_dir`` and, per row, the measured errors and
        balanced error rates (columns ``*_error`` and ``*_ber``) as ``<row>/<column>`` keys
        (fractions in [0, 1]).

    Raises
    ------
    ValueError
        If the experiment name is unknown, or the settings set ``quick`` (use ``smoke``).
    """
    experiment = _node(cfg, "experiment")
    name = _node(experiment, "name")
    if name not in EXPERIMENTS:
        raise ValueError(f"Unknown experiment {name!r}; valid experiments are {', '.join(EXPERIMENTS)}")
    smoke = bool(_node(cfg, "smoke", False))
    settings = _settings(experiment)
    if "quick" in settings:
        raise ValueError("experiment.quick is not an option: set smoke=true (bmm +experiment=NAME smoke=true)")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_config(output_dir / "config.yaml", cfg)
    t0 = time.perf_counter()
    rows, table = EXPERIMENTS[name](**settings, quick=smoke)
    wall = time.perf_counter() - t0
    if smoke:
        table = f"{SMOKE_BANNER}\n\n{table}"
    records = [{"experiment": name, **rec} for rec in FOLDS[name](rows)]
    write_folds(records, output_dir)
    figures = []
    for filename, fig in FIGURES[name](rows, records).items():
        save_figure(fig, output_dir / filename)
        figures.append(filename)
    payload = {
        "experiment": name,
        "smoke": smoke,
        "settings": settings,
        "rows": rows,
        "table": table,
        "figures": figures,
        "wall_time_s": wall,
        "machine": machine_info(),
    }
    write_json(output_dir / "results.json", payload, default=float)
    write_text(output_dir / "table.md", table + "\n")
    metrics: dict[str, Any] = {
        "experiment": name,
        "smoke": smoke,
        "table": table,
        "wall_time_s": wall,
        "n_rows": len(rows),
        "n_folds": len(records),
        "figures": figures,
        "output_dir": str(output_dir),
    }
    for row in rows:
        for key, value in row.items():
            if key.endswith(("_error", "_ber")) and not key.startswith("paper_") and isinstance(value, float):
                metrics[f"{row['key']}/{key}"] = value
    return metrics
