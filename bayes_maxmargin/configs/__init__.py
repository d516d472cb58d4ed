"""Configuration files of the ``bmm`` command (Hydra) and the resolver they use.

``${smoke:<full>,<smoke>}`` in an experiment's yaml is ``<full>`` normally and ``<smoke>`` when the
run's top-level ``smoke`` option is true (``bmm +experiment=NAME smoke=true``): the settings of a
smoke run sit beside the full ones, and an explicit override of the key replaces both.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register_resolvers"]


def _smoke(full: Any, smoke: Any, *, _root_: Any) -> Any:
    return smoke if _root_.get("smoke", False) else full


def register_resolvers() -> None:
    """Register the ``smoke`` resolver with OmegaConf (once; later calls do nothing)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("smoke"):
        OmegaConf.register_new_resolver("smoke", _smoke)
