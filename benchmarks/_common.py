"""Helpers shared by the benchmark scripts: result files (with the machine description) and tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bayes_maxmargin.experiments import machine_info

RESULTS = Path(__file__).resolve().parent / "results"


def write_results(name: str, payload: dict[str, Any], out_dir: Path = RESULTS) -> Path:
    """Write ``payload`` plus the machine description to ``<out_dir>/<name>.json`` (by default
    ``benchmarks/results/``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps({"machine": machine_info(), **payload}, indent=2, default=float))
    return path


def result_name(base: str, quick: bool = False, tag: str = "") -> str:
    """``base``, then ``_quick`` for a smoke run and ``_<tag>`` for a tagged one (e.g. ``gpu``), so
    that neither overwrites the reference results."""
    return base + ("_quick" if quick else "") + (f"_{tag}" if tag else "")


def markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A markdown table of ``rows`` restricted to ``columns``."""

    def fmt(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
