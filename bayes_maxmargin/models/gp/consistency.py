"""Whether the parts of a restored GP fit agree (:func:`bayes_maxmargin.load`): the relations that the fit
computed its stored values by, each checked within a bound on the rounding errors of computing them
(:mod:`bayes_maxmargin.core.consistency`).

* ECM / FITC (:class:`~bayes_maxmargin.models.gp.posterior.ModePosterior`): the E-step's omega is
  c / max(``|1 - y f|``, floor) at the stored f (Henao et al. 2014, eq. 8), and the representer weights
  solve (K + Lambda / gamma) alpha = Y (1 + lambda) (eq. 12) at that omega;
* VI and the samplers: K alpha = f (alpha = K^-1 f);
* SVI: q(u)'s mean is what the state's natural parameters and whitening give;
* every fit: the shapes of the posterior's training data against the fitted attributes, the support
  vectors against the training inputs, ``idata_`` against the posterior (its labels, or the mean of its
  draws), and the probit link.

Each function raises ValueError naming what disagrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayes_maxmargin.core.augmentation import margin_floor
from bayes_maxmargin.core.consistency import (
    check_equal,
    check_mean_of_draws,
    check_rows,
    check_shape,
    check_within,
    unit_roundoff,
)
from bayes_maxmargin.core.kernels import get_kernel, kernel_diag
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.core.parameters import params_dict
from bayes_maxmargin.core.predict import LINK_INPUTS
from bayes_maxmargin.models.gp.posterior import DrawsPosterior, ModePosterior, SVIPosterior, VIPosterior
from bayes_maxmargin.models.gp.svi import inducing_posterior

__all__ = ["check_gp_fit", "check_link"]


def check_gp_fit(state: Mapping[str, Any], n_features: int, gamma0: float, jitter: float) -> None:
    """Raise ValueError where the state of a binary GP fit (the estimator's attributes) does not hang
    together; ``gamma0`` and ``jitter`` are the fit's (defaults filled in)."""
    post = state["_posterior"]
    if isinstance(post, SVIPosterior):
        _check_svi(post, state, n_features)
    elif isinstance(post, (ModePosterior, VIPosterior, DrawsPosterior)):
        _check_dense(post, state, n_features, gamma0, jitter)
    else:
        raise ValueError(f"_posterior is a {type(post).__name__}, not a GP posterior")
    if "link_" in state:
        check_link(state["link_"])
    if state.get("link_input_", "f") not in LINK_INPUTS:
        raise ValueError(f"link_input_ is {state['link_input_']!r}, not one of {', '.join(map(repr, LINK_INPUTS))}")


def check_link(link: Any) -> None:
    """``link_`` is (a, b), finite, with a > 0 (:func:`~bayes_maxmargin.core.predict.fit_probit_link`
    fits log a)."""
    check_shape("link_", link, (2,))
    a, b = np.asarray(link, np.float64)
    if not (np.isfinite(a) and np.isfinite(b) and a > 0.0):
        raise ValueError(f"link_ (a, b) = ({a}, {b}) is not a finite link of positive slope a")


# ------------------------------------------------------------------------------------------ the full GP
def _dtype(state: Mapping[str, Any]) -> type:
    return np.float64 if state.get("_x64", True) else np.float32


def _check_dense(post: Any, state: Mapping[str, Any], d: int, gamma0: float, jitter: float) -> None:
    X = np.asarray(post.X)
    check_shape("the posterior's training inputs", X, (None, d))
    n = X.shape[0]
    for name in ("f_", "alpha_"):
        if name in state:
            check_shape(name, state[name], (n,))
    if isinstance(post, VIPosterior):
        check_shape("the posterior's W^1/2", post.sw, (n,))
        check_shape("the posterior's Cholesky factor", post.LB, (n, n))
        if "alpha_" in state:
            check_equal("alpha_", state["alpha_"], np.asarray(post.alpha, np.float64), "the posterior's alpha")
    if isinstance(post, DrawsPosterior):
        check_shape("the posterior's draws of f", post.f_draws, (None, n))
    y = _labels(post, state, n)
    _check_kernel_params(state, post.theta, _dtype(state))
    if isinstance(post, ModePosterior):
        _check_mode(post, state, gamma0, _dtype(state))
    elif "f_" in state and "alpha_" in state:
        _check_solved(post, state, _dtype(state), jitter)
    _check_draws(post, state, jitter, _dtype(state))
    if "support_" in state and y is not None and "f_" in state:
        _check_support(state, X, y)


def _labels(post: Any, state: Mapping[str, Any], n: int) -> np.ndarray | None:
    """The +-1 training labels: the posterior's (ECM, FITC), checked against ``idata_``'s observed data,
    or ``idata_``'s."""
    observed = getattr(state.get("idata_"), "observed_data", None)
    y_idata = None if observed is None or "y" not in observed else np.asarray(observed["y"], np.float64)
    y = np.asarray(post.y, np.float64) if isinstance(post, ModePosterior) else y_idata
    if y is not None:
        check_shape("the training labels", y, (n,))
        if not np.all(np.abs(y) == 1.0):
            raise ValueError("the training labels are not all -1 or +1")
    if isinstance(post, ModePosterior) and y_idata is not None:
        check_equal("idata_'s observed labels", y_idata, y, "the labels of the posterior (another fit's idata_)")
    return y


def _check_support(state: Mapping[str, Any], X: np.ndarray, y: np.ndarray) -> None:
    """``support_`` are the points with y f <= 1 + 1e-3 (eq. 13,
    :func:`~bayes_maxmargin.models.gp.ecm.support_vectors`), ``support_vectors_`` their inputs and
    ``dual_coef_`` their alpha."""
    support = np.asarray(state["support_"])
    check_equal("support_", support, np.flatnonzero(y * np.asarray(state["f_"]) <= 1.0 + 1e-3),
                "the points on or inside the margin of f_")
    if "support_vectors_" in state:  # the float64 inputs, of which the posterior holds the fit's rounding
        check_equal("support_vectors_", np.asarray(state["support_vectors_"]).astype(X.dtype), X[support],
                    "the training inputs of support_")
    if "dual_coef_" in state and "alpha_" in state:
        check_equal("dual_coef_", state["dual_coef_"], np.asarray(state["alpha_"])[support][None, :],
                    "alpha_ at support_")


def _check_kernel_params(state: Mapping[str, Any], theta: Any, dtype: type, roundings: int = 1) -> None:
    """``kernel_params_`` are the posterior's kernel parameters ``theta``, to ``roundings`` roundings in the
    fit's precision (doubled): one where the posterior stores theta, more where it is computed again."""
    if "kernel_params_" not in state:
        return
    stored, values = state["kernel_params_"], params_dict(theta)
    if not isinstance(stored, Mapping) or set(stored) != set(values):
        raise ValueError(f"kernel_params_ names {sorted(stored) if isinstance(stored, Mapping) else stored!r}, "
                         f"not the posterior's kernel parameters {sorted(values)}")
    for path, value in values.items():
        value = np.asarray(value, np.float64)
        check_shape(f"kernel_params_[{path!r}]", stored[path], value.shape)
        check_within(f"kernel_params_[{path!r}]", np.asarray(stored[path], np.float64) - value,
                     2.0 * roundings * unit_roundoff(dtype) * np.abs(value), "the posterior's kernel parameter")


def _kernel_diag(post: Any) -> np.ndarray:
    """k(x_i, x_i) at the posterior's training inputs, in float64."""
    with float_precision(True):
        theta = jax.tree.map(lambda a: jnp.asarray(a, np.float64), post.theta)
        return np.asarray(kernel_diag(post.kernel, theta, jnp.asarray(np.asarray(post.X, np.float64))), np.float64)


def _kernel_rows(post: Any, rows: np.ndarray, jitter: float, dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """K (jitter on the diagonal) at ``rows`` of the training inputs and all of them, and its diagonal,
    in float64; and the rounding error of the fit's evaluation of those rows, estimated as the change
    between float32 and float64 evaluations scaled by u(dtype) / u(float32)."""
    kfn = get_kernel(post.kernel)
    X = np.asarray(post.X, np.float64)
    with float_precision(True):
        values = {}
        for precision in (np.float32, np.float64):
            theta = jax.tree.map(lambda a, p=precision: jnp.asarray(a, p), post.theta)
            Xp = jnp.asarray(X, precision)
            values[precision] = np.asarray(kfn(theta, Xp[rows], Xp), np.float64)
    diag = _kernel_diag(post) + jitter
    K = values[np.float64].copy()
    K[np.arange(rows.size), rows] += jitter
    error = np.abs(values[np.float64] - values[np.float32]) * (unit_roundoff(dtype) / unit_roundoff(np.float32))
    return K, diag, error


def _solve_bound(n: int, dtype: type, diag: np.ndarray, rows: np.ndarray, x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bound on the residual A x - b at ``rows`` of a solution x of A x = b computed through the Cholesky
    factor of the symmetric positive definite A of diagonal ``diag``: the computed x solves
    (A + dA) x = b with |dA| <= gamma_{3n+1} |L| |L'| (Higham 2002, Thm 10.4), and
    (|L| |L'|)_ij <= sqrt(A_ii A_jj) (Cauchy-Schwarz on two rows of L); the roundings of forming A
    (entries of at most sqrt(A_ii A_jj)) and b (a few u |b|) come on top, in all at most 4 (n + 4) u."""
    u = unit_roundoff(dtype)
    root = np.sqrt(np.maximum(diag, 0.0))
    return 4.0 * (n + 4) * u * (root[rows] * np.sum(root * np.abs(x)) + np.abs(b[rows]))


def _check_mode(post: ModePosterior, state: Mapping[str, Any], gamma0: float, dtype: type) -> None:
    """ECM / FITC: the E-step at f_ and, for the dense prior, the representer weights at its omega."""
    n = np.shape(post.X)[0]
    omega, gamma = np.asarray(post.inv_lam, np.float64), float(np.asarray(post.gamma))
    check_shape("the posterior's E[1/lambda]", omega, (n,))
    if not (np.isfinite(gamma) and gamma > 0.0):
        raise ValueError(f"the posterior's gamma {gamma} is not positive")
    if "gamma_" in state:  # gamma_ is the fit's gamma (a float) or the estimate the posterior holds
        check_within("gamma_", float(state["gamma_"]) - gamma, 2.0 * unit_roundoff(dtype) * gamma,
                     "the posterior's gamma")
    y = np.asarray(post.y, np.float64)
    if "f_" in state:
        # omega = c / max(|1 - y f|, floor), c = sqrt(1 + 2 gamma0 / gamma) (eq. 8): at most 8 roundings in the
        # fit's precision (1 - y f, gamma0 itself, 2 gamma0 / gamma, 1 + ., the square root, the division;
        # y f is exact), each a relative u; twice that
        f = np.asarray(state["f_"], np.float64)
        c = np.sqrt(1.0 + 2.0 * gamma0 / gamma)
        scaled = omega * np.maximum(np.abs(1.0 - y * f), margin_floor(dtype)) / c
        check_within("f_", scaled - 1.0, 16.0 * unit_roundoff(dtype),
                     "omega = E[1 / lambda] at f_ (eq. 8): f_ is not the latent function of the posterior")
    if "alpha_" in state and post.V is None:
        rows = check_rows(n)
        K, diag, error = _kernel_rows(post, rows, float(post.jitter), dtype)
        alpha = np.asarray(state["alpha_"], np.float64)
        # (I + S K S) z = S t, alpha = S z, S = diag(sqrt(gamma omega)), t = y (1 + 1 / omega), as
        # scaled_factor / alpha_from_factor solve it
        s = np.sqrt(gamma * omega)
        z, b = alpha / s, y * np.sqrt(gamma) * (np.sqrt(omega) + 1.0 / np.sqrt(omega))
        residual = z[rows] + s[rows] * (K @ alpha) - b[rows]
        bound = _solve_bound(n, dtype, 1.0 + s * s * diag, rows, z, b) + 2.0 * s[rows] * (error @ np.abs(alpha))
        check_within("alpha_", residual, bound, "(K + Lambda / gamma) alpha = Y (1 + lambda) (eq. 12) at the "
                                                "posterior's E[1/lambda]")


def _check_solved(post: Any, state: Mapping[str, Any], dtype: type, jitter: float) -> None:
    """VI, Gibbs, NUTS: alpha_ = K^-1 f_ (K with the fit's ``jitter``), so K alpha_ = f_ to the rounding of
    a Cholesky solve; checked where that solve factorised K without more jitter, which Higham's
    20 n^3/2 kappa u <= 1 guarantees (Higham 2002, Thm 10.7; kappa <= trace(K) / jitter for a positive
    semi-definite kernel)."""
    n = np.shape(post.X)[0]
    rows = check_rows(n)
    K, diag, error = _kernel_rows(post, rows, jitter, dtype)
    if jitter <= 0.0 or 20.0 * n**1.5 * unit_roundoff(dtype) * np.sum(diag) / jitter > 1.0:
        return
    alpha, f = np.asarray(state["alpha_"], np.float64), np.asarray(state["f_"], np.float64)
    bound = _solve_bound(n, dtype, diag, rows, alpha, f) + 2.0 * (error @ np.abs(alpha))
    check_within("alpha_", K @ alpha - f[rows], bound, "K alpha_ = f_ (alpha_ = K^-1 f_)")


def _check_draws(post: Any, state: Mapping[str, Any], jitter: float, dtype: type) -> None:
    """``idata_``'s draws of f against f_: the samplers' f_ is their mean (and files of 0.1.0 hold VI's f_ as
    its one draw). VI's are independent draws of
    q(f)'s marginals as :meth:`~bayes_maxmargin.models.gp.posterior.VIPosterior.latent_moments` gives them
    at the training inputs, of mean K alpha_ without the jitter, f_ - jitter alpha_, to the rounding of
    that product in the fit's precision (n u sqrt(K_ii) sum_j sqrt(K_jj) |alpha_j|, |K_ij| <= sqrt(K_ii K_jj)
    for a positive semi-definite kernel)."""
    posterior = getattr(state.get("idata_"), "posterior", None)
    if posterior is None or "f" not in posterior or "f_" not in state or isinstance(post, ModePosterior):
        return
    draws, f = np.asarray(posterior["f"]), np.asarray(state["f_"], np.float64)
    if isinstance(post, DrawsPosterior) or "approximation" not in posterior.attrs:  # 0.1.0's VI: one draw, f_
        return check_mean_of_draws("f_", draws, f, independent=False)
    alpha = np.asarray(post.alpha, np.float64)
    root = np.sqrt(np.maximum(_kernel_diag(post), 0.0))
    allowance = 2.0 * (np.size(f) + 2) * unit_roundoff(dtype) * root * np.sum(root * np.abs(alpha))
    check_mean_of_draws("f_", draws, f - jitter * alpha, independent=True, allowance=allowance)


# ------------------------------------------------------------------------------------------ SVI
def _check_svi(post: SVIPosterior, state: Mapping[str, Any], d: int) -> None:
    """q(u) = N(L mu_v, L zeta_v L') of the state (:func:`~bayes_maxmargin.models.gp.svi.inducing_posterior`)
    against ``variational_mean_``, ``variational_cov_``, ``inducing_points_`` and ``kernel_params_``."""
    spec = post.problem.features.spec
    W, eta1, eta2 = (np.asarray(a, np.float64) for a in (post.state.whiten, post.state.nat.eta1, post.state.nat.eta2))
    m = eta1.shape[0] if eta1.ndim == 1 else -1
    check_shape("the state's eta1", eta1, (m,))
    check_shape("the state's eta2", eta2, (m, m))
    check_shape("the state's whitening", W, (m, m))
    dtype = _dtype(state)
    with float_precision(dtype == np.float64):  # as the fit computed them
        theta, Z, mean, cov = inducing_posterior(post.state, spec)
    check_shape("the state's inducing points", Z, (m, d))
    for name, value in (("variational_mean_", mean), ("variational_cov_", cov), ("inducing_points_", Z)):
        if name in state:
            check_shape(name, state[name], np.shape(value))
    if "inducing_points_" in state:
        check_equal("inducing_points_", state["inducing_points_"], np.asarray(Z, np.float64),
                    "the state's inducing points")
    # theta = softplus(r) recomputed from the state's unconstrained r: the stable form of softplus rounds 4
    # times (exp, log1p, a sum, a maximum), in the fit and again here, each a relative u; 8 in all
    _check_kernel_params(state, theta, dtype, roundings=8)
    if "variational_mean_" in state:
        # mean = W^-1 P^-1 eta1 (P = -2 eta2) in float64, through a triangular inverse and a Cholesky solve:
        # each computation is off by at most 4 (m + 1) u (kappa(W) + kappa(P) + 1) |W^-1| |P^-1 eta1| (the
        # first-order forward errors of the two solves and of the product); the stored and the recomputed
        # mean, twice that apart
        P = -2.0 * eta2
        scale = np.linalg.norm(np.linalg.inv(W), 2) * np.linalg.norm(np.linalg.solve(P, eta1))
        kappa = np.linalg.cond(W) + np.linalg.cond(P) + 1.0
        bound = 8.0 * (m + 1) * unit_roundoff(np.float64) * kappa * scale
        check_within("variational_mean_", np.linalg.norm(np.asarray(state["variational_mean_"]) - mean), bound,
                     "the mean of q(u) that the state's natural parameters give")
    posterior = getattr(state.get("idata_"), "posterior", None)
    if posterior is not None and "u" in posterior and "variational_mean_" in state:
        check_mean_of_draws("variational_mean_", np.asarray(posterior["u"]), state["variational_mean_"],
                            independent=True)
