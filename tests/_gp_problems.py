"""Helpers shared by the GP ECM and FITC tests (their data: the ``sine`` fixture of conftest)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from bayes_maxmargin.core.kernels import SEParams
from bayes_maxmargin.models.gp.model import GPHyper

KP = SEParams(lengthscale=0.7, amplitude=1.0)


def make_hyper(gamma0: float, gamma: float = 1.0) -> GPHyper:
    """GPHyper with a Ga(2, 1) prior on gamma (used only when gamma is estimated)."""
    return GPHyper(jnp.asarray(gamma), jnp.asarray(2.0), jnp.asarray(1.0), jnp.asarray(gamma0))


def finite(trace) -> np.ndarray:
    """The non-NaN entries of an objective trace."""
    trace = np.asarray(trace)
    return trace[~np.isnan(trace)]
