"""Fitted posteriors of the GP Bayesian SVM: one typed object per kind of fit, each with one
predictive method, :meth:`latent_moments`, the mean and variance of f_* at new inputs.

* :class:`ModePosterior`: the ECM fixed point under the dense prior or its FITC form, with the
  predictive of eq. (11)-(12) (:func:`~bayes_maxmargin.models.gp.ecm.gp_predict`);
* :class:`VIPosterior`: the full-batch variational posterior q(f) = N(mu, Sigma) of the B-BSVM
  (Wenzel et al. 2017, Sec. 4.1);
* :class:`DrawsPosterior`: MCMC draws of f (Gibbs or NUTS), at one theta or with joint draws of theta,
  whose predictive is the mixture over draws (eq. 11 averaged over the draws);
* :class:`SVIPosterior`: the S-BSVM's q(u) on the inducing points (Wenzel et al. 2017, Sec. 4.4).

Each holds what its predictive needs (the training inputs, the kernel's name and jitter included),
so that ``posterior.latent_moments(X, dtype)`` is all a prediction takes (a
:class:`~bayes_maxmargin.core.posterior.Posterior`). The Gaussian ones also give the leave-one-out moments
of f at the training inputs, ``posterior.loo_latent(X, y, gamma, dtype)``
(:func:`~bayes_maxmargin.core.predict.loo_cavity`; a :class:`~bayes_maxmargin.core.posterior.LeaveOneOut`
posterior), from which ``GPBSVM(calibrate=True)`` fits its link.

Example
-------
>>> import numpy as np
>>> from bayes_maxmargin import GPBSVM
>>> from bayes_maxmargin.core.linalg import float_precision
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(40, 2)); y = (X[:, 0] > 0).astype(int)
>>> clf = GPBSVM(inference="ecm", learn_kernel=False, max_iter=20).fit(X, y)
>>> type(clf._posterior).__name__
'ModePosterior'
>>> with float_precision(True):  # the fit's float64
...     mean, var = clf._posterior.latent_moments(X[:3], np.float64)
>>> np.allclose(mean, clf.predict_latent(X[:3])[0])
True
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from bayes_maxmargin.core.compilation import bucket_rows, jit
from bayes_maxmargin.core.kernels import get_kernel, kernel_diag
from bayes_maxmargin.core.predict import group_rows, group_sites, loo_cavity
from bayes_maxmargin.engine.natural_gradient import local_alpha
from bayes_maxmargin.engine.svi import Problem, SVIState, latent_parts, predict_moments
from bayes_maxmargin.models.gp.covariance import loo_moments, pseudo_obs
from bayes_maxmargin.models.gp.ecm import (
    criterion_covariance,
    gp_predict,
    gp_predict_from_draws,
    gp_predict_from_theta_draws,
)

__all__ = ["DrawsPosterior", "ModePosterior", "SVIPosterior", "VIPosterior"]


class ModePosterior(NamedTuple):
    """The ECM fixed point (Henao et al. 2014, eq. 8-9), under the dense prior or its FITC form (eq. 10).

    Attributes
    ----------
    X, y : Array
        Training inputs (n, d) and +-1 labels (n,).
    inv_lam, gamma : Array
        omega = E[1 / lambda] and gamma at the fixed point.
    theta : NamedTuple
        Kernel parameters.
    V : Array or None
        FITC pseudo-inputs (M, d); None for the dense prior.
    kernel : str or Kernel
        Covariance function (a name or a kernel object).
    jitter : float
        Diagonal jitter of the fit.
    """

    X: Array
    y: Array
    inv_lam: Array
    gamma: Array
    theta: Any
    V: Array | None
    kernel: Any
    jitter: float

    def latent_moments(self, X: Any, dtype: Any) -> tuple[Array, Array]:
        """Predictive mean and variance of f_* at ``X`` (eq. 11-12), computed in ``dtype``."""
        return gp_predict(jnp.asarray(self.X, dtype), jnp.asarray(X, dtype), jnp.asarray(self.y, dtype),
                          self.inv_lam, self.gamma, self.theta, V=self.V, kernel=self.kernel, jitter=self.jitter)

    def loo_latent(self, X: Any, y: Any, gamma: Any, dtype: Any, groups: np.ndarray | None = None,
                   rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out mean and variance of f_n at the training inputs given omega
        (:func:`~bayes_maxmargin.models.gp.covariance.loo_moments`); ``X``, ``y`` and ``gamma`` are
        the fit's own (of the rows ``rows``), which this posterior holds. ``groups``: labels of groups of
        identical rows (:func:`~bayes_maxmargin.core.predict.tie_groups`; of the rows ``rows``, which must
        hold every twin of each), whose rows get leave-group-out moments. ``rows``: indices of the training
        rows whose moments are returned (None: all), computed for those rows only."""
        V = None if self.V is None else jnp.asarray(self.V, dtype)
        groups = None if groups is None else jnp.asarray(group_rows(groups))
        rows = None if rows is None else jnp.asarray(rows)
        out = _mode_loo(jnp.asarray(self.X, dtype), jnp.asarray(self.y, dtype), jnp.asarray(self.inv_lam, dtype),
                        jnp.asarray(self.gamma, dtype), self.theta, V, groups, rows, kernel=self.kernel,
                        jitter=self.jitter)
        return tuple(np.asarray(a, np.float64) for a in out)


@partial(jit, static_argnames=("kernel", "jitter"))
def _mode_loo(X, y, inv_lam, gamma, theta, V, groups, rows, *, kernel, jitter):
    return loo_moments(criterion_covariance(theta, X, y, V, kernel, jitter), inv_lam, gamma, groups, rows)


class VIPosterior(NamedTuple):
    """The B-BSVM's q(f) = N(mu, Sigma) at fixed theta (Wenzel et al. 2017, Sec. 4.1).

    Attributes
    ----------
    X : Array
        Training inputs (n, d).
    theta : NamedTuple
        Kernel parameters.
    sw, LB : Array
        W^1/2 and the Cholesky factor of I + W^1/2 K W^1/2 at the final q(lambda), so that
        Sigma = K - K W^1/2 B^-1 W^1/2 K.
    alpha : Array
        K^-1 mu (n,).
    kernel : str or Kernel
        Covariance function (a name or a kernel object).
    """

    X: Array
    theta: Any
    sw: Array
    LB: Array
    alpha: Array
    kernel: Any

    def latent_moments(self, X: Any, dtype: Any) -> tuple[Array, Array]:
        """Mean k_*' K^-1 mu and variance k_** - k_*' W^1/2 B^-1 W^1/2 k_* of f_* at ``X``."""
        kfn = get_kernel(self.kernel)
        X = jnp.asarray(X, dtype)
        Ks = kfn(self.theta, jnp.asarray(self.X, dtype), X)
        half = jax.scipy.linalg.solve_triangular(self.LB, self.sw[:, None] * Ks, lower=True)
        return Ks.T @ jnp.asarray(self.alpha, dtype), kernel_diag(kfn, self.theta, X) - jnp.sum(half**2, axis=0)

    def loo_latent(self, X: Any, y: Any, gamma: Any, dtype: Any, groups: np.ndarray | None = None,
                   rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out mean and variance of f_n at the training inputs ``X`` (the fit's, labels ``y``
        coded +-1; the training rows ``rows`` of them when given, None: all): the site of point n in q(f),
        precision W_n = gamma alpha_n^-1/2 and mean y_n (1 + gamma / W_n) (Sec. 4.1), divided out
        (:func:`~bayes_maxmargin.core.predict.loo_cavity`); with ``groups`` (labels of groups of identical
        rows, every twin among ``X``), the sites of its whole group
        (:func:`~bayes_maxmargin.core.predict.group_sites`)."""
        mean, var = (np.asarray(a, np.float64) for a in self.latent_moments(X, dtype))
        sw = np.asarray(self.sw, np.float64)
        omega = (sw if rows is None else sw[rows]) ** 2 / float(gamma)  # E[1 / lambda_n] = alpha_n^-1/2
        return _cavity(mean, var, float(gamma) * omega, pseudo_obs(np.asarray(y, np.float64), omega), groups)


class DrawsPosterior(NamedTuple):
    """Posterior draws of f (Gibbs or NUTS), at one theta or with joint draws of theta.

    Attributes
    ----------
    X : Array
        Training inputs (n, d).
    f_draws : Array
        Draws of f at the training inputs (S, n), chains pooled.
    theta : NamedTuple
        The kernel parameters (their posterior mean when they were sampled).
    theta_draws : NamedTuple or None
        The kernel parameters of each draw (leading axis S) when they were sampled, else None.
    kernel : str or Kernel
        Covariance function (a name or a kernel object).
    jitter : float
        Diagonal jitter of the fit.
    """

    X: Array
    f_draws: Array
    theta: Any
    theta_draws: Any
    kernel: Any
    jitter: float

    def latent_moments(self, X: Any, dtype: Any) -> tuple[Array, Array]:
        """Mean and variance of the mixture over draws of the GP conditionals f_* | f (eq. 11)."""
        X_train, X, F = jnp.asarray(self.X, dtype), jnp.asarray(X, dtype), jnp.asarray(self.f_draws, dtype)
        if self.theta_draws is not None:
            theta = jax.tree.map(lambda a: jnp.asarray(a, dtype), self.theta_draws)
            return gp_predict_from_theta_draws(X_train, X, F, theta, kernel=self.kernel, jitter=self.jitter)
        mean, mean_sq, cond_var = gp_predict_from_draws(X_train, X, F, self.theta, kernel=self.kernel,
                                                        jitter=self.jitter)
        return mean, cond_var + jnp.maximum(mean_sq - mean**2, 0.0)


class SVIPosterior(NamedTuple):
    """The S-BSVM's q(u) = N(mu, zeta) on the inducing points (Wenzel et al. 2017, Sec. 4.4).

    Attributes
    ----------
    state : SVIState
        The final state of the run (natural parameters, kernel parameters, inducing points).
    problem : Problem
        The compiled features of the GP (:func:`~bayes_maxmargin.models.gp.svi.gp_problem`).
    """

    state: SVIState
    problem: Problem

    def latent_moments(self, X: Any, dtype: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """K_*m K_mm^-1 mu and K_** - K_*m K_mm^-1 K_m* + K_*m K_mm^-1 zeta K_mm^-1 K_m*, in the
        state's precision (``dtype`` is not used: the data stay on the host, chunk by chunk)."""
        return predict_moments(self.state, self.problem, X)

    def loo_latent(self, X: Any, y: Any, gamma: Any, dtype: Any = None, groups: np.ndarray | None = None,
                   rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out mean and variance of f_n at training inputs ``X`` (labels ``y`` coded +-1; ``rows``,
        their indices among the training rows, is not needed: q(u) holds no per-row state): q(v)
        takes point n through the site on phi_n' v of eq. (9)-(10), precision gamma alpha_n^-1/2 and
        mean y_n (1 + alpha_n^1/2) at the alpha_n of Alg. 1, line 7; that site divided out
        (:func:`~bayes_maxmargin.core.predict.loo_cavity`), Ktilde_nn added back; with ``groups`` (labels
        of groups of identical rows, which share phi_n' v), the sites of its whole group
        (:func:`~bayes_maxmargin.core.predict.group_sites`). The rows are padded to
        :func:`~bayes_maxmargin.core.compilation.bucket_rows` (one program for fits of nearby sizes)."""
        n, rows = X.shape[0], bucket_rows(X.shape[0])
        padded = np.concatenate([X, np.zeros((rows - n, X.shape[1]), X.dtype)])
        mean, var, ktilde = latent_parts(self.state, self.problem, padded)
        y = np.concatenate([np.asarray(y, mean.dtype), np.ones(rows - n, mean.dtype)])
        # E[1 / lambda_n] = alpha_n^-1/2 of Alg. 1, line 7, on the padded rows
        omega = np.asarray(_local_alpha(mean, var, y))[:n] ** -0.5
        mean, var, ktilde, y = mean[:n], var[:n], ktilde[:n], y[:n]
        return _cavity(mean, var - ktilde, float(gamma) * omega, pseudo_obs(y, omega), groups, ktilde)


def _cavity(mean, var, site_prec, target, groups, extra_var=0.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~bayes_maxmargin.core.predict.loo_cavity` of each row's site, or with ``groups`` (labels) of
    its group's (:func:`~bayes_maxmargin.core.predict.group_sites`)."""
    if groups is not None:
        site_prec, target = group_sites(site_prec, target, groups)
    return loo_cavity(mean, var, site_prec, target, extra_var)


#: :func:`~bayes_maxmargin.engine.natural_gradient.local_alpha` as one program (one per row bucket).
_local_alpha = jit(local_alpha)
