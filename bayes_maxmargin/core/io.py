"""Atomic file writes: a crash or an interrupt during a write never leaves a half-written file in
place of a good one."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "write_config", "write_json", "write_text"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it is flushed to disk and renamed onto
    ``path`` (``os.replace``, atomic on POSIX and Windows), on any exception it is removed and
    ``path`` is left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj: Any, **kwargs: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (``kwargs`` go to :func:`json.dumps`)."""
    write_text(path, json.dumps(obj, **{"indent": 2, **kwargs}))


def write_config(path: str | os.PathLike, cfg: Any) -> None:
    """Write a run configuration (OmegaConf node or mapping) as YAML to ``path`` atomically, its
    interpolations resolved (``OmegaConf.to_yaml(cfg, resolve=True)``)."""
    from omegaconf import DictConfig, OmegaConf

    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    write_text(path, OmegaConf.to_yaml(cfg, resolve=True))
