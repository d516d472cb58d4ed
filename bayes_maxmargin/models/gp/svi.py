"""S-BSVM of Wenzel et al. (2017) for the GP Bayesian SVM: inducing points, whitened features and the
natural-gradient run of :mod:`bayes_maxmargin.engine.svi` with ML-II steps on the kernel parameters and
the inducing points (eq. 12)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.linalg
from jax import Array

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.kernels import feature_scale, get_kernel, kernel_diag
from bayes_maxmargin.core.linalg import cholesky_or_raise, jittered_cholesky
from bayes_maxmargin.core.parameters import SOFTPLUS, Unflatten, from_unconstrained, hold_fixed, to_unconstrained
from bayes_maxmargin.engine.natural_gradient import Features, NatParams, triangular_inverse
from bayes_maxmargin.engine.svi import (
    Problem,
    SVIResult,
    SVIState,
    _class,
    _n_problems,
    _run_from,
    _step_key,
    data_mesh,
    init_state,
    step_transform,
)

__all__ = ["gp_features", "inducing_posterior", "prediction_problem", "scale_free_adam"]


# ============================================================================ models as features
class GPSpec(NamedTuple):
    """Static description of the sparse GP: the kernel, a container of its parameters (of which only the
    structure, :class:`~bayes_maxmargin.core.parameters.Unflatten`, is read), the jitter of K_mm and the
    hyperparameters that ML-II moves (kernel field paths and/or ``"inducing"``; the others are held by
    :func:`~bayes_maxmargin.core.parameters.hold_fixed`).

    Specs that agree in these (the values of the free fields of ``like`` are never read) are equal
    and hash alike, so a spec can be a static argument of a jitted function."""

    kernel: Callable
    like: Any
    jitter: float
    learn: tuple[str, ...] = ()

    def _identity(self) -> tuple:
        return self.kernel, Unflatten.of(self.like), self.jitter, tuple(sorted(self.learn))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GPSpec) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


def gp_hyper(hyper: dict[str, Array], spec: GPSpec) -> tuple[Any, Array]:
    """Kernel parameters and inducing locations from the unconstrained hyperparameter dict, those not in
    ``spec.learn`` cut from the gradient."""
    if spec.learn:
        hyper = hold_fixed(hyper, spec.learn)
    raw = {k: v for k, v in hyper.items() if k != "inducing"}
    return from_unconstrained(raw, spec.like), hyper["inducing"]


def gp_factors(hyper: dict[str, Array], spec: GPSpec) -> tuple[Array, Array]:
    """L with L L' = K_mm + jitter I (more jitter only if needed), and the whitening W = L^-1."""
    theta, Z = gp_hyper(hyper, spec)
    Kmm = spec.kernel(theta, Z, Z)
    L, _ = jittered_cholesky(Kmm + spec.jitter * jnp.eye(Z.shape[0], dtype=Kmm.dtype))
    return L, triangular_inverse(L)


def gp_features(hyper: dict[str, Array], whiten: Array, X: Array, spec: GPSpec) -> Features:
    """phi_i = L^-1 K_mi and Ktilde_ii = K_ii - ||phi_i||^2 (eq. 6), floored at 0; ``whiten`` = L^-1."""
    theta, Z = gp_hyper(hyper, spec)
    phi = (whiten @ spec.kernel(theta, Z, X)).T
    kdiag = kernel_diag(spec.kernel, theta, X)
    return Features(phi, jnp.maximum(kdiag - jnp.sum(phi**2, axis=1), 0.0))


class GPFeatures(NamedTuple):
    """:func:`gp_features` at ``spec``, as a value: equal specs give equal (and equally hashed) feature
    functions, so the full-data passes of every fit with the same kernel share one compiled program."""

    spec: GPSpec

    def __call__(self, hyper: dict[str, Array], whiten: Array, X: Array) -> Features:
        return gp_features(hyper, whiten, X, self.spec)


def gp_problem(spec: GPSpec, num_inducing: int, dtype: Any, learn: bool) -> Problem:
    """The sparse GP's :class:`Problem`: whitened features, K_mm factors when hyperparameters move,
    and the prior precision I of v = L^-1 u."""
    return Problem(GPFeatures(spec), partial(gp_factors, spec=spec) if learn else None,
                   np.eye(num_inducing, dtype=dtype))


def prediction_problem(spec: GPSpec, state: SVIState) -> Problem:
    """The :class:`Problem` that predicts from a finished run's ``state``: ``spec`` with nothing to learn
    (the same compiled features for a fit and for the file it is saved to)."""
    return gp_problem(spec._replace(learn=()), state.whiten.shape[0], state.whiten.dtype, False)


def svi_gp(
    X: np.ndarray,
    y: np.ndarray,
    theta0: Any,
    Z0: np.ndarray,
    seed: int | Sequence[int] = 0,
    *,
    kernel: str | Callable,
    learn: tuple[str, ...] = (),
    num_steps: int,
    batch_size: int,
    step_size: Any = "robbins_monro",
    hyper_every: int = 10,
    learning_rate: float = 0.05,
    gamma: float = 1.0,
    jitter: float = 1e-6,
    dtype: Any = np.float64,
    devices: int | None = None,
    progress: bool = False,
    callback: Callable | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: str | os.PathLike | None = None,
) -> tuple[SVIResult, Problem] | list[tuple[SVIResult, Problem]]:
    """S-BSVM for the GP model from q(u) = p(u) (Alg. 1), with ML-II (Adam, ``learning_rate``) on the
    hyperparameters named in ``learn`` (kernel fields and/or ``"inducing"``) every ``hyper_every``
    steps. Call inside ``jax.enable_x64`` for float64.

    With labels ``y`` of shape (K, N), the K binary problems (one-vs-rest) run in one program
    (:func:`run_svi`), ``Z0`` of shape (m, d) or (K, m, d) and ``seed`` one or K seeds, and the
    result is a list of K pairs."""
    spec = GPSpec(get_kernel(kernel), theta0, float(jitter), tuple(learn))
    hyper_tx = scale_free_adam(learning_rate) if learn else optax.set_to_zero()  # nothing moves: no Adam moments
    nat_tx = step_transform(step_size, num_steps)
    m = Z0.shape[-2]
    Zs = np.asarray(np.broadcast_to(Z0, (_n_problems(y), m, Z0.shape[-1])), dtype)
    hypers, whitens = jax.device_get(_gp_start(theta0, Zs, spec))
    nat0 = NatParams(np.zeros(m, dtype), -0.5 * np.eye(m, dtype=dtype))
    states = [init_state(nat0, _class(hypers, c), whitens[c], nat_tx, hyper_tx) for c in range(Zs.shape[0])]
    problem = gp_problem(spec, m, dtype, learn=bool(learn))
    key = ("gp", spec, tuple(sorted(learn)), _step_key(step_size), float(learning_rate))
    return _run_from(states, problem, X, y, nat_tx=nat_tx, hyper_tx=hyper_tx, batch_size=batch_size,
                     num_steps=num_steps, hyper_every=hyper_every, learn_hyper=bool(learn), gamma=gamma, seed=seed,
                     mesh=data_mesh(devices, batch_size), dtype=dtype, progress=progress, callback=callback,
                     cache_key=key, checkpoint=checkpoint, resume=resume)


class ScaleFreeAdamState(NamedTuple):
    """State of :func:`scale_free_adam`: Adam's, and the unit of the inducing points' steps."""

    adam: Any
    unit: Array


def scale_free_adam(learning_rate: float) -> optax.GradientTransformation:
    """Adam on S-BSVM's hyperparameters in coordinates that do not depend on the units of the data: the
    kernel fields, held as softplus^-1 theta (:func:`~bayes_maxmargin.core.parameters.to_unconstrained`),
    move by Adam steps in log theta, and the inducing points by Adam steps in units of their initial
    spread (:func:`~bayes_maxmargin.core.kernels.feature_scale`). Inputs multiplied by c then give
    length-scales and inducing points multiplied by c and the same kernel matrices, where plain Adam on
    softplus^-1 theta would step by ``learning_rate`` in theta itself (no move at all for a length-scale
    of 1e5, a factor e^0.05 for one of 1e-10).

    Each update feeds Adam the gradient in log theta, ``g_r theta / sigmoid(r)``, and returns the change
    of r that multiplies theta by exp of Adam's step (none where that step is zero: fixed fields stay)."""
    adam = optax.adam(learning_rate)

    def split(tree):
        return {k: v for k, v in tree.items() if k != "inducing"}, tree["inducing"]

    def init(params):
        return ScaleFreeAdamState(adam.init(params), feature_scale(params["inducing"]))

    def update(updates, state, params):
        grad, grad_z = split(updates)
        raw, _ = split(params)
        theta = {k: SOFTPLUS.forward(r) for k, r in raw.items()}
        grad_log = {k: grad[k] * theta[k] / jax.nn.sigmoid(raw[k]) for k in raw}
        steps, adam_state = adam.update({**grad_log, "inducing": grad_z * state.unit}, state.adam)
        step_log, step_z = split(steps)
        moved = {k: jnp.where(step_log[k] == 0, 0.0, SOFTPLUS.inverse(theta[k] * jnp.exp(step_log[k])) - raw[k])
                 for k in raw}  # a field held fixed (zero gradient, zero step) stays exactly where it is
        return {**moved, "inducing": step_z * state.unit}, state._replace(adam=adam_state)

    return optax.GradientTransformation(init, update)


@partial(jit, static_argnums=2, compiler_options={"xla_backend_optimization_level": 0})  # runs once per fit
def _gp_start(theta0: Any, Z: Array, spec: GPSpec) -> tuple[dict[str, Array], Array]:
    """The unconstrained hyperparameters and the whitening L^-1 of K_mm for the problems with
    inducing locations ``Z`` (K, m, d), stacked along the leading axis, in one compiled program (op
    by op, every kernel and factorisation operation would compile on its own on a first fit)."""
    raw = {k: jnp.asarray(v, Z.dtype) for k, v in to_unconstrained(theta0).items()}

    def one(Zk):
        hyper = {**raw, "inducing": Zk}
        return hyper, gp_factors(hyper, spec)[1]

    return jax.vmap(one)(Z)


def inducing_posterior(state: SVIState, spec: GPSpec) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """Kernel parameters, inducing locations and q(u) = N(L mu_v, L zeta_v L') of an S-BSVM state
    (u = L v, K_mm + jitter I = L L', zeta_v = (-2 eta2)^-1), in float64 on the host from the
    state's whitening L^-1: the factor the run used, and no program to compile.

    Returns
    -------
    theta, Z, mean_u, cov_u
    """
    theta, Z = gp_hyper(state.hyper, spec)
    W, eta1, eta2 = (np.asarray(a, np.float64) for a in (state.whiten, state.nat.eta1, state.nat.eta2))
    chol = scipy.linalg.solve_triangular(W, np.eye(W.shape[0]), lower=True)
    try:
        prec = np.linalg.cholesky(-2.0 * eta2)  # zeta_v^-1 = C C'
    except np.linalg.LinAlgError:  # the run's factor needed jitter too
        prec = np.asarray(cholesky_or_raise(-2.0 * eta2)[0], np.float64)
    mu_v = scipy.linalg.cho_solve((prec, True), eta1)
    A = scipy.linalg.solve_triangular(prec, chol.T, lower=True)  # C^-1 L', so L zeta_v L' = A' A
    return theta, np.asarray(Z), chol @ mu_v, A.T @ A
