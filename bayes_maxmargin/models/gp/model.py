"""The nonlinear (Gaussian-process) Bayesian SVM of Henao et al. (2014).

    theta_j ~ LogNormal(loc_j, scale_j^2) on every positive kernel field (optional, see below),
    f ~ N(0, K),  K_ij = k(x_i, x_j; theta)                             (Henao et al. 2014, eq. 6),
    gamma fixed, or gamma ~ Ga(a0, b0),
    p(y_n | f_n) proportional to exp(-2 gamma max(1 - y_n f_n, 0))   (gamma0 = 0, eq. 3),
    or the skewed Laplace sLa(1 - y_n f_n | gamma, gamma0)           (gamma0 > 0, eq. 4-5),
    lambda_n ~ Exp(gamma0) in the augmented form                       (eq. 5-6).

The latent function f at the training inputs is the sample site ``"f"`` with prior covariance
``K + jitter I`` (:func:`prior_covariance`). The kernel parameters theta are fixed unless a
:class:`KernelPrior` is given: then every positive field of the kernel's parameter container
(``lengthscale`` and ``amplitude`` of the SE kernel, ...) is a sample site of that name with an
independent log-normal prior, and K is built from the sampled theta (the posterior that the slice
updates of :mod:`bayes_maxmargin.models.gp.gibbs_theta` target; Henao et al. 2014, Sec. 3).
With ``noncentered=True`` the program samples ``"z" ~ N(0, I)`` and records f = L_theta z as the
deterministic site ``"f"`` (the same posterior, a geometry NUTS explores more easily when theta
moves).

Two forms of the same program, as for :func:`~bayes_maxmargin.models.linear.model.linear_bsvm`:

* marginal (``augmented=False``): lambda integrated out, the pseudo-likelihood entered with
  ``numpyro.factor``; NUTS on this form is the reference posterior;
* augmented (``augmented=True``): lambda_n an explicit sample site with a flat improper prior
  (gamma0 = 0) or Exp(gamma0); the joint that the conjugate Gibbs kernel of eq. (7) targets
  (:mod:`bayes_maxmargin.models.gp.gibbs`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax import Array
from jax.scipy.stats import norm
from jax.typing import ArrayLike

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.kernels import ARDParams, Kernel, KernelFn, SEParams, get_kernel
from bayes_maxmargin.core.linalg import limit_threads
from bayes_maxmargin.core.parameters import Unflatten, field_values, free_fields, replace_fields
from bayes_maxmargin.core.predict import distinct_rows
from bayes_maxmargin.models.common import hinge_scale_sites, max_margin_likelihood

__all__ = ["GPHyper", "KernelPrior", "check_num_inducing", "default_kernel_params", "default_kernel_prior",
           "gp_bsvm", "init_inducing", "kernel_log_prior", "kernel_prior", "prior_covariance",
           "sample_kernel_params"]


class GPHyper(NamedTuple):
    """Hyperparameters of the GP model, as arrays (changing them never recompiles a kernel).

    Attributes
    ----------
    gamma : Array
        Hinge scale; the fixed value, or the initial value when gamma has a Gamma prior.
    a0, b0 : Array
        Shape and rate of the Gamma prior on gamma (unused when gamma is fixed), eq. (6).
    gamma0 : Array
        Rate of the exponential prior on lambda (0: the hinge of eq. 3), eq. (5); the fixed value, or
        the initial value (> 0) when gamma0 has a Gamma prior.
    gamma0_shape, gamma0_rate : Array
        Shape and rate of the Gamma prior on gamma0 (unused when gamma0 is fixed).
    """

    gamma: Array
    a0: Array
    b0: Array
    gamma0: Array
    gamma0_shape: Array = 1.0
    gamma0_rate: Array = 1.0


def default_kernel_params(kernel: str | KernelFn, n_features: int) -> Any:
    """Default parameters of a kernel: unit lengthscale(s) and amplitude, degree 2, unit variance (a
    :class:`~bayes_maxmargin.core.kernels.Kernel` object: its values, unit length-scales where unset)."""
    obj = kernel if isinstance(kernel, Kernel) else get_kernel(kernel)
    if isinstance(obj, Kernel):
        return obj.init_params(np.zeros((1, n_features)))  # one row: unit length-scales
    raise ValueError("kernel_params must be given for a user-supplied kernel function")


class KernelPrior(NamedTuple):
    """Independent log-normal prior on the positive kernel parameters: log theta_j ~ N(loc_j, scale_j^2).

    Attributes
    ----------
    loc : dict of str to Array
        Mean of log theta for every positive field of the kernel's parameter container (keys as in
        :func:`~bayes_maxmargin.core.kernels.free_fields`), each broadcast to the field's shape (``(d,)`` for ARD).
    scale : dict of str to Array
        Standard deviation of log theta, same keys and shapes.
    """

    loc: dict[str, Array]
    scale: dict[str, Array]


def kernel_prior(params: Any, scale: ArrayLike = 1.0, fields: tuple[str, ...] | None = None) -> KernelPrior:
    """Log-normal prior centred at ``params``: log theta_j ~ N(log params_j, scale^2), on the fields that
    are sampled (the others stay at their values in ``params``).

    Parameters
    ----------
    params : NamedTuple
        Kernel parameters (any container of :mod:`bayes_maxmargin.core.kernels`); the prior's median.
    scale : ArrayLike
        Standard deviation of log theta_j, the same for every field (1: a factor e either way
        within one standard deviation).
    fields : tuple of str, optional
        The sampled fields (paths, :func:`~bayes_maxmargin.core.parameters.free_fields`); None: all.

    Returns
    -------
    KernelPrior
        ``loc`` and ``scale`` per positive field, broadcast to the field's shape.
    """
    loc, sd = {}, {}
    values = field_values(params)
    for name in free_fields(params) if fields is None else fields:
        value = jnp.asarray(values[name], dtype=jnp.result_type(float))
        loc[name] = jnp.log(value)
        sd[name] = jnp.broadcast_to(jnp.asarray(scale, value.dtype), value.shape)
    return KernelPrior(loc, sd)


def default_kernel_prior(kernel: str | KernelFn, n_features: int, scale: float = 1.0) -> KernelPrior:
    """Default prior on theta: log-normal with standard deviation ``scale`` around a typical value.

    The median is :func:`default_kernel_params` except that (ARD) lengthscales are sqrt(d): with
    standardised inputs E||x - x'||^2 = 2 d, so k(x, x') is about a e^-2 for a typical pair and the
    prior GP is neither constant nor white noise whatever the dimension d.
    """
    params = default_kernel_params(kernel, n_features)
    root_d = float(n_features) ** 0.5
    if isinstance(params, SEParams):
        params = params._replace(lengthscale=root_d)
    elif isinstance(params, ARDParams):
        params = params._replace(lengthscales=jnp.full((n_features,), root_d))
    return kernel_prior(params, scale)


def kernel_log_prior(log_theta: Array, prior: KernelPrior, unflatten: Unflatten) -> Array:
    """log p(log theta) = sum_j log N(log theta_j | loc_j, scale_j^2) over the fields ``prior`` covers, of the
    flat ``log_theta`` that ``unflatten`` maps back (:func:`~bayes_maxmargin.core.parameters.flatten` with the
    log bijection). The density of theta itself (NumPyro's log-normal sites) is this minus the sum of the
    covered log theta_j.

    Examples
    --------
    >>> from bayes_maxmargin.core.kernels import SEParams
    >>> from bayes_maxmargin.core.parameters import flatten
    >>> prior = kernel_prior(SEParams(jnp.asarray(2.0), jnp.asarray(1.0)), scale=1.0)
    >>> log_theta, unflatten = flatten(SEParams(2.0, jnp.e))
    >>> round(float(kernel_log_prior(log_theta, prior, unflatten)), 4)
    -2.3379
    """
    loc, scale = unflatten.layout(prior.loc), unflatten.layout(prior.scale)
    return jnp.sum(norm.logpdf(covered_log_theta(log_theta, prior, unflatten), loc, scale))


def sampled_coordinates(prior: KernelPrior, unflatten: Unflatten) -> np.ndarray | None:
    """The coordinates of the flat log theta that are sampled: those of the fields the prior covers (the
    trainable ones, :func:`kernel_prior`); None when that is all of them."""
    idx = unflatten.coordinates(prior.loc)
    return None if idx.size == unflatten.size else idx


def covered_log_theta(log_theta: Array, prior: KernelPrior, unflatten: Unflatten) -> Array:
    """The entries of the flat ``log_theta`` whose fields ``prior`` covers (the sampled ones), in order."""
    idx = sampled_coordinates(prior, unflatten)
    return log_theta if idx is None else log_theta[..., idx]


def sample_kernel_params(prior: KernelPrior, params: Any) -> Any:
    """NumPyro sites for theta: ``numpyro.sample(name, LogNormal(loc, scale))`` per field of the prior.

    Returns ``params`` with those fields replaced by the sampled values (the other fields, e.g. the
    polynomial degree or fields held fixed, are kept).
    """
    sampled = {}
    for name in (f for f in free_fields(params) if f in prior.loc):
        loc, scale = jnp.asarray(prior.loc[name]), jnp.asarray(prior.scale[name])
        sampled[name] = numpyro.sample(name, dist.LogNormal(loc, scale).to_event(loc.ndim))
    return replace_fields(params, sampled)


def prior_covariance(
    X: ArrayLike, kernel: str | KernelFn = "rbf", kernel_params: Any = None, jitter: float = 1e-6
) -> Array:
    """Prior covariance ``K + jitter I`` of f at the inputs ``X`` (Henao et al. 2014, eq. 6).

    Parameters
    ----------
    X : ArrayLike, shape (n, d)
        Inputs.
    kernel : str or callable
        A name in :data:`~bayes_maxmargin.core.kernels.KERNELS` or a function ``k(params, X1, X2)``.
    kernel_params : NamedTuple, optional
        The kernel's parameters theta (fixed); :func:`default_kernel_params` when omitted.
    jitter : float
        Absolute diagonal jitter that keeps K numerically positive definite.

    Returns
    -------
    Array, shape (n, n)
    """
    X = jnp.asarray(X)
    if X.ndim == 1:
        X = X[:, None]
    if kernel_params is None:
        kernel_params = default_kernel_params(kernel, X.shape[1])
    return _covariance(get_kernel(kernel), kernel_params, X, jitter)


@partial(jit, static_argnums=0)
def _covariance(kernel: KernelFn, kernel_params: Any, X: Array, jitter: ArrayLike) -> Array:
    """K + jitter I, one compiled program per kernel and shape (not one per operation)."""
    K = kernel(kernel_params, X, X)
    return K + jitter * jnp.eye(X.shape[0], dtype=K.dtype)


def gp_bsvm(
    X: Array,
    y: Array | None = None,
    *,
    kernel: str | KernelFn = "rbf",
    kernel_params: Any = None,
    gamma: float = 1.0,
    gamma_prior: tuple[float, float] | None = None,
    gamma0: float = 0.1,
    jitter: float = 1e-6,
    augmented: bool = False,
    kernel_prior: KernelPrior | None = None,
    noncentered: bool = False,
    gamma0_prior: tuple[float, float] | None = None,
) -> Array:
    """NumPyro program of the GP Bayesian SVM (Henao et al. 2014, eq. 6).

    Parameters
    ----------
    X : Array, shape (n, d)
        Training inputs.
    y : Array, shape (n,), optional
        Labels coded +-1. Without labels the program returns the prior draw of f (the
        pseudo-likelihood generates no labels).
    kernel : str or callable
        Covariance function (``"rbf"``, ``"ard"``, ``"poly"``, ``"linear"`` or a callable).
    kernel_params : NamedTuple, optional
        Kernel parameters theta; :func:`default_kernel_params` when omitted. With
        ``kernel_prior`` only their container type and fixed fields (the polynomial degree) are
        used.
    gamma : float
        Fixed hinge scale (ignored when ``gamma_prior`` is given).
    gamma_prior : (a0, b0), optional
        Shape and rate of a Gamma prior on gamma (eq. 6).
    gamma0 : float
        Rate of lambda's exponential prior (eq. 5); 0 is Polson & Scott's hinge (flat prior on
        lambda).
    jitter : float
        Diagonal jitter of the prior covariance, ``f ~ N(0, K + jitter I)``.
    augmented : bool
        If True, lambda is an explicit sample site ``"lam"`` (the joint of the Gibbs kernel, eq. 7).
    kernel_prior : KernelPrior, optional
        If given, every positive kernel field is a sample site of its name (e.g. ``"lengthscale"``,
        ``"amplitude"``) with prior log theta_j ~ N(loc_j, scale_j^2), and K is built from it.
    noncentered : bool
        If True, f = L z with ``"z" ~ N(0, I)`` and L L' = K + jitter I; ``"f"`` is then a
        deterministic site. The same posterior as the centred program.
    gamma0_prior : (shape, rate), optional
        A Gamma prior on gamma0, the sample site ``"gamma0"`` (``gamma0`` is then ignored; the
        conjugate prior Henao et al. mention after eq. 6).

    Returns
    -------
    Array
        The latent function f at X.
    """
    X = jnp.asarray(X)
    if X.ndim == 1:
        X = X[:, None]
    n = X.shape[0]
    if kernel_prior is not None:
        if kernel_params is None:
            kernel_params = default_kernel_params(kernel, X.shape[1])
        kernel_params = sample_kernel_params(kernel_prior, kernel_params)
    cov = prior_covariance(X, kernel, kernel_params, jitter)
    if noncentered:
        z = numpyro.sample("z", dist.Normal(jnp.zeros(n, cov.dtype), 1.0).to_event(1))
        f = numpyro.deterministic("f", jnp.linalg.cholesky(cov) @ z)
    else:
        f = numpyro.sample("f", dist.MultivariateNormal(jnp.zeros(n, cov.dtype), covariance_matrix=cov))
    gamma, gamma0 = hinge_scale_sites(gamma, gamma_prior, gamma0, gamma0_prior)
    if y is None:
        return f
    max_margin_likelihood(1.0 - y * f, gamma, gamma0, augmented, sampled_gamma0=gamma0_prior is not None)
    return f


# --------------------------------------------------------------------------- pseudo-inputs
def check_num_inducing(num_inducing: int, n: int) -> None:
    if not 1 <= int(num_inducing) <= n:
        raise ValueError(f"num_inducing must be between 1 and N = {n}, got num_inducing={num_inducing}")


#: Up to this many rows k-means runs on all of them; above, MiniBatchKMeans on a subsample of 20 times as many.
_KMEANS_FULL = 50_000


def init_inducing(
    X: ArrayLike, num_inducing: int, method: str = "kmeans", random_state: int = 0
) -> np.ndarray:
    """Initial pseudo-inputs V (M x d) for FITC (eq. 10) and svi, chosen among the distinct rows of X.

    Where X has at most M distinct rows (repeated inputs), V is all of them, each once, fewer than M
    points: k-means would leave centres without a point and ML-II would face a singular K_mm with
    repeated pseudo-inputs.

    Parameters
    ----------
    X : ArrayLike, shape (n, d)
        Training inputs.
    num_inducing : int
        M, with 1 <= M <= N.
    method : {"kmeans", "random"}
        k-means++ centres (scikit-learn ``KMeans(n_clusters=M, random_state=random_state)``, with one
        OpenMP thread: beside XLA's threads on a loaded 2-core machine its own made the k-means of
        1400 rows 10-20 times slower; above 50 000 rows ``MiniBatchKMeans`` on a random subsample of
        10^6 rows) or a random subset of the distinct rows of X without replacement.
    random_state : int
        Seed.

    Returns
    -------
    numpy.ndarray, shape (min(M, number of distinct rows), d)

    Raises
    ------
    ValueError
        If num_inducing is not in [1, N] or the method is unknown.
    """
    X = X if isinstance(X, np.ndarray) else np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if isinstance(num_inducing, bool) or int(num_inducing) != num_inducing:
        raise ValueError(f"num_inducing must be an integer, got num_inducing={num_inducing!r}")
    check_num_inducing(num_inducing, X.shape[0])
    M = int(num_inducing)
    if method == "kmeans":
        from sklearn.cluster import KMeans, MiniBatchKMeans

        if X.shape[0] > _KMEANS_FULL:
            rows = np.random.default_rng(random_state).choice(X.shape[0], size=min(X.shape[0], 20 * _KMEANS_FULL),
                                                              replace=False)
            X = X[np.sort(rows)]
        first = distinct_rows(X)  # of the rows k-means sees
        if first.size <= M:
            return np.asarray(X[first], dtype=float)
        if X.shape[0] <= _KMEANS_FULL:
            km = KMeans(n_clusters=M, random_state=random_state, n_init=1, init="k-means++")
            with limit_threads(1, "openmp"):
                return np.asarray(km.fit(X).cluster_centers_, dtype=float)
        km = MiniBatchKMeans(n_clusters=M, random_state=random_state, n_init=1, batch_size=4096)
        return np.asarray(km.fit(np.asarray(X, dtype=float)).cluster_centers_, dtype=float)
    if method == "random":
        first = distinct_rows(X)
        if first.size > M:
            first = first[np.sort(np.random.default_rng(random_state).choice(first.size, size=M, replace=False))]
        return np.asarray(X[first], dtype=float)
    raise ValueError(f"method must be 'kmeans' or 'random', got {method!r}")
