"""Checks shared by the sampler tests: posterior agreement from draws, jit against eager."""

from __future__ import annotations

import arviz as az
import jax
import numpy as np
import xarray as xr


def assert_posteriors_agree(a, b, var_names: list[str], *, z: float = 4.0, sd_rtol: float = 0.10,
                            max_rhat: float = 1.02) -> None:
    """Means within ``z`` combined Monte Carlo standard errors, standard deviations within ``sd_rtol``
    or within ``z`` combined Monte Carlo standard errors of the sd (a heavy-tailed marginal sampled with
    a small effective sample size has an sd estimate noisier than ``sd_rtol``).

    ``a`` and ``b`` are InferenceData or dicts of draws laid out (chain, draw, ...); both must have
    converged (R-hat < ``max_rhat``).
    """
    sa, sb = (
        az.summary(x if isinstance(x, xr.DataTree) else az.from_dict({"posterior": {k: x[k] for k in var_names}}),
                   var_names=var_names, round_to="none")
        for x in (a, b)
    )
    assert sa["r_hat"].max() < max_rhat and sb["r_hat"].max() < max_rhat, (sa["r_hat"], sb["r_hat"])
    mcse = np.sqrt(sa["mcse_mean"] ** 2 + sb["mcse_mean"] ** 2)
    dist = np.abs(sa["mean"] - sb["mean"]) / mcse
    assert (dist < z).all(), f"means differ by {dist.max():.1f} MCSE\n{sa[['mean', 'sd']]}\n{sb[['mean', 'sd']]}"
    rel = np.abs(sa["sd"] / sb["sd"] - 1)
    sd_z = np.abs(sa["sd"] - sb["sd"]) / np.sqrt(sa["mcse_sd"] ** 2 + sb["mcse_sd"] ** 2)
    assert ((rel < sd_rtol) | (sd_z < z)).all(), (
        f"sd differ by {rel.max():.1%} ({sd_z[rel >= sd_rtol].max():.1f} MCSE)\n{sa['sd']}\n{sb['sd']}")


def assert_jit_equals_eager(kernel, key, state, data, hyper) -> None:
    """One step of ``kernel`` compiled and op by op give the same state."""
    jitted, _ = jax.jit(kernel)(key, state, data, hyper)
    with jax.disable_jit():
        eager, _ = kernel(key, state, data, hyper)
    # over the leaves: a state field that is None (no directional moves) has none
    assert jax.tree_util.tree_structure(jitted) == jax.tree_util.tree_structure(eager)
    for a, b in zip(jax.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(eager)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
