"""Compiled forms of the eager functions the GP sampler tests call: run op by op, every JAX operation
compiles a small program of its own (again for each new shape or dtype), which costs several times the
compilation of the whole function as one program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from numpyro.infer.util import log_density

from bayes_maxmargin.models.gp.gibbs import init_gp as _init_gp
from bayes_maxmargin.models.gp.gibbs_theta import init_gp_theta as _init_gp_theta

#: init_gp(f, data, hyper, sample_gamma, sample_gamma0=False) as one program
init_gp = jax.jit(_init_gp, static_argnums=(3, 4))
#: init_gp_theta(f, params, data, hyper, *, kernel, ...) as one program (the kernel, the sampled fields and
#: the flags static, the parameters traced)
init_gp_theta = jax.jit(_init_gp_theta, static_argnames=("kernel", "sample_gamma", "sample_gamma0"))


def log_density_program(model: Callable, args: tuple, kwargs: dict[str, Any]) -> Callable:
    """``sites -> log_density(model, args, kwargs, sites)[0]`` compiled as one program (for a test that
    evaluates it at several sites)."""
    return jax.jit(lambda sites: log_density(model, args, kwargs, sites)[0])
