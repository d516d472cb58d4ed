"""``GPBSVM``: the nonlinear (Gaussian-process) Bayesian SVM of Henao et al. (2014) and its sparse
variants (FITC; S-BSVM of Wenzel et al. 2017) as a scikit-learn classifier."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import _num_samples

from bayes_maxmargin._version import __version__
from bayes_maxmargin.core.augmentation import ELLIPTICAL_STEPS
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.kernels import ARD, Constant, Kernel, as_kernel, get_kernel, kernel_name, median_distance
from bayes_maxmargin.core.linalg import (
    CholeskyError,
    cholesky_or_raise,
    float_precision,
    jittered_cholesky,
    limit_blas_threads,
)
from bayes_maxmargin.core.memory import (
    available_memory,
    check_dense_memory,
    check_memory,
    dense_bytes,
    largest_fitting,
    matrix_bytes,
)
from bayes_maxmargin.core.parameters import field_values, free_fields, params_dict, replace_fields, trainable_fields
from bayes_maxmargin.core.posterior import LeaveOneOut
from bayes_maxmargin.core.predict import (
    LINK_SHIFT_LIMIT,
    fit_probit_link,
    link_rows,
    link_shift,
    linked_moments,
    probit_margin,
    tie_groups,
)
from bayes_maxmargin.core.checks import InvalidParameterError, check_option, check_scalar_param
from bayes_maxmargin.core.kernels import check_kernel_params
from bayes_maxmargin.data.splits import cross_fit_folds
from bayes_maxmargin.data.validation import check_scale, check_X_y
from bayes_maxmargin.diagnostics import (
    APPROXIMATION_DRAWS,
    MixingWarning,
    SeparableClassesWarning,
    gaussian_draws,
)
from bayes_maxmargin.engine.mcmc import NonFiniteStateError, float64_hint, init_chains, run_chains
from bayes_maxmargin.estimators.base import (
    _BayesianSVMClassifier,
    _chain_starts,
    _check_gamma0_prior,
    _check_gamma_prior,
    _gamma0_hyper,
    _key_seed,
    _pointwise_log_lik,
    reports_progress,
)
from bayes_maxmargin.estimators.multiclass import classes_together
from bayes_maxmargin.estimators.registry import Method, Registry, Settings
from bayes_maxmargin.models.gp.consistency import check_gp_fit
from bayes_maxmargin.models.gp.covariance import (
    alpha_from_factor,
    fitc_alpha,
    fitc_factors,
    gp_data,
    scaled_factor,
)
from bayes_maxmargin.models.gp.ecm import (
    ML2_OPTIMIZERS,
    MLII_CRITERIA,
    ecm_runs,
    gp_ecm_mlii,
    support_vectors,
)
from bayes_maxmargin.models.gp.gibbs import build_gp_kernel, init_gp, record_gp
from bayes_maxmargin.models.gp.gibbs_theta import (
    THETA_SAMPLERS,
    build_gp_theta_kernel,
    build_gp_theta_record,
    gp_theta_data,
    init_gp_theta,
)
from bayes_maxmargin.models.gp.model import (
    GPHyper,
    KernelPrior,
    gp_bsvm,
    init_inducing,
    kernel_prior,
    prior_covariance,
)
from bayes_maxmargin.models.gp.posterior import DrawsPosterior, ModePosterior, SVIPosterior, VIPosterior
from bayes_maxmargin.models.gp.svi import GPSpec, inducing_posterior, prediction_problem, svi_gp
from bayes_maxmargin.models.gp.vi import batch_vi, batch_vi_factor

__all__ = ["GPBSVM", "GPMethod", "GP_METHODS"]


# ============================================================================ GP Bayesian SVM
_GP_KERNELS = ("rbf", "ard", "poly", "linear")
#: Joint draws of (theta, f) used for prediction when theta is sampled (one Cholesky each).
_PREDICT_THETA_DRAWS = 200


@dataclass(frozen=True, kw_only=True)
class GPMethod(Method):
    """An inference method of :class:`GPBSVM` (:data:`GP_METHODS`): the :class:`Method` fields, and

    Attributes
    ----------
    dense_buffers : int or None
        Dense N x N matrices held at the peak of a full-GP fit (None: an inducing-point fit).
    inducing_matrices : mapping or None
        The matrices held at the peak of an inducing-point fit with M points, counted by shape
        (:func:`inducing_memory`); None for the full GP. Such a fit takes ``num_inducing``.
    streams : bool
        Whether it streams minibatches from the host (svi): the data stay there, and it takes
        ``batch_size``.
    precision : str
        ``precision=None``.
    mlii : bool
        Whether ML-II chooses the kernel parameters (a point estimate, ``kernel_params_``).
    criteria : tuple of str
        The ``mlii_criterion`` values it can maximise, its default (``mlii_criterion=None``) first.
    mlii_every, mlii_tol : int, float or None
        ``mlii_every=None`` and ``mlii_tol="auto"``.
    posterior : type
        The class of the posterior it fits (:class:`~bayes_maxmargin.core.posterior.Posterior`). Where
        that is a :class:`~bayes_maxmargin.core.posterior.LeaveOneOut` posterior (:attr:`calibrates`),
        ``calibrate=None`` learns the link from its leave-one-out moments; the others keep Phi(f).
    num_samples, max_iter : int or None
        ``num_samples=None`` and ``max_iter=None`` (None: :func:`default_svi_steps`).
    hinge_only : bool
        Whether it fits the hinge model of Wenzel et al. (2017) only (gamma0 = 0, gamma fixed).
    ard_from, optimize_inducing_from : int or None
        The number of training rows from which ``kernel=None`` is ``ARD() + Constant()``
        (:func:`default_kernel`) and ``optimize_inducing=None`` moves the inducing points
        (:func:`default_optimize_inducing`); None: never.
    """

    dense_buffers: int | None = None
    inducing_matrices: Mapping[str, int] | None = None
    streams: bool = False
    precision: str = "float64"
    mlii: bool = False
    criteria: tuple[str, ...] = ("evidence",)
    mlii_every: int = 20
    mlii_tol: float | None = None
    posterior: type = DrawsPosterior
    num_samples: int = 1000
    max_iter: int | None = 200
    hinge_only: bool = False
    ard_from: int | None = None
    optimize_inducing_from: int | None = None

    @property
    def calibrates(self) -> bool:
        """Whether its posterior has leave-one-out moments of its own (a
        :class:`~bayes_maxmargin.core.posterior.LeaveOneOut` posterior)."""
        return issubclass(self.posterior, LeaveOneOut)


@dataclass(frozen=True, kw_only=True)
class GPSettings(Settings):
    """The parameters of a :class:`GPBSVM` fit (:class:`~bayes_maxmargin.estimators.registry.Settings` and
    GPBSVM's own), checked once (:meth:`GPBSVM._checked_params`), with the defaults of its inference method
    filled in. ``kernel``, ``optimize_inducing``, ``num_inducing`` and ``batch_size`` stay None where the
    defaults depend on the data until the fit resolves them (:func:`default_kernel`,
    :func:`default_optimize_inducing`, :func:`default_svi_inducing`). Each field is the estimator parameter
    of its name, except ``elliptical_steps`` (``marginal_moves``) and ``calibrate`` ("cv" where the link
    comes from refits, else whether it is learnt at all)."""

    method: GPMethod
    kernel: Any
    inducing: str
    optimizer: str
    mlii_every: int
    mlii_steps: int
    mlii_tol: float | None
    mlii_criterion: str
    learning_rate: float
    num_inducing: int | None
    optimize_inducing: bool | None
    jitter: float
    kernel_prior_scale: float
    theta_sampler: str
    elliptical_steps: int
    calibrate: bool | str


def _initial_kernel_params(kernel: str | Kernel, kernel_params: Any, X: np.ndarray, dtype: Any) -> Any:
    """Kernel parameters theta to start from: the kernel's (length-scale(s) at the median distance between
    training points and unit amplitude unless set) overridden by the user's ``kernel_params``; a
    ValueError where that distance is too small for ``dtype`` (:func:`check_scale`)."""
    scale = median_distance(X)
    check_scale(scale, dtype=dtype, estimator_name="GPBSVM")
    return check_kernel_params(kernel, kernel_params, as_kernel(kernel).init_params(X, scale))


def _check_kernel(kernel: Any) -> str | Kernel:
    """``kernel``: a :class:`~bayes_maxmargin.core.kernels.Kernel` object or one of the names."""
    return kernel if isinstance(kernel, Kernel) else check_option("kernel", kernel, _GP_KERNELS)


def _feature_dims(params: Any) -> dict[str, list[str]]:
    """idata_ dims of the ARD length-scales (one per input feature), at any depth of a composed kernel."""
    return {path: ["feature"] for path in free_fields(params) if path.rpartition("__")[2] == "lengthscales"}


def _kernel_values(params: Any) -> dict[str, np.ndarray]:
    """The positive kernel fields by path (idata_'s constant data where ML-II or the user set them)."""
    values = params_dict(params)
    return {path: np.asarray(values[path], dtype=np.float64) for path in free_fields(params)}


def _trainable(params: Any, learn_kernel: Any) -> tuple[str, ...]:
    """The kernel fields that ML-II moves (ECM, FITC, SVI) or the samplers sample, from ``learn_kernel``."""
    try:
        return trainable_fields(params, learn_kernel)
    except ValueError as err:
        raise InvalidParameterError(str(err)) from None


# the steps of a fit around its main program, each compiled as one program (not one per operation)
#: :func:`~bayes_maxmargin.models.gp.model.kernel_prior` (its ``fields`` static) as one program.
_kernel_prior = jit(kernel_prior, static_argnums=2)


@partial(jit, static_argnames="kernel")
def _fitc_alpha(params: Any, X: jax.Array, V: jax.Array, y: jax.Array, inv_lam: jax.Array, gamma: jax.Array,
                kernel: Any, jitter: Any) -> jax.Array:
    """alpha of FITC at the fitted theta and pseudo-inputs, :func:`fitc_alpha` of :func:`fitc_factors`, as the
    prediction program computes them (compiled, the kernel matrices round differently in their last bit from
    an op-by-op evaluation)."""
    return fitc_alpha(fitc_factors(params, X, V, y, kernel, jitter), inv_lam, gamma)


@partial(jit, static_argnames=("kernel", "jitter"))
def _mode_alpha(params: Any, X: jax.Array, y: jax.Array, inv_lam: jax.Array, gamma: jax.Array, kernel: Any,
                jitter: Any) -> jax.Array:
    """alpha of the dense ECM mode (eq. 12, as :func:`gp_alpha` computes it) at the fitted theta, as one
    program."""
    s, chol_b = scaled_factor(prior_covariance(X, kernel, params, jitter), inv_lam, gamma)
    return alpha_from_factor(s, chol_b, y, inv_lam, gamma)


@partial(jit, static_argnames=("kernel", "jitter"))
def _factorises(params: Any, X: jax.Array, kernel: Any, jitter: Any) -> jax.Array:
    """Whether K + jitter I of the inputs ``X`` has a finite Cholesky factor (with the jitter search of
    :func:`~bayes_maxmargin.core.linalg.jittered_cholesky`), as one program."""
    return jnp.all(jnp.isfinite(jittered_cholesky(prior_covariance(X, kernel, params, jitter))[0]))


@jit
def _cho_solve(chol: jax.Array, b: jax.Array) -> jax.Array:
    """K^-1 b given K's lower Cholesky factor."""
    return cho_solve((chol, True), b)


#: ``batch_size=None`` (svi) and ``num_inducing=None`` (FITC): this many, or N where N is smaller.
DEFAULT_BATCH = 100
#: ``num_inducing=None`` for svi: this many inducing points, fewer on fewer than 3 x 64 rows
#: (:func:`default_svi_inducing`). Measured with ``benchmarks/vs_peers.py`` (5 splits, all nine sets):
#: against 100, second fits 1.7-2 times shorter (the M^3 algebra of every step and of every ML-II
#: gradient), test error and Brier score within the split-to-split spread (splice: error 0.051 -> 0.056,
#: still below every peer's).
DEFAULT_SVI_INDUCING = 64
#: ``num_inducing=None`` for svi keeps at least this many training rows per inducing point. As M nears N
#: the k-means centres become the rows themselves and S-BSVM the full GP, whose ML-II on the hinge
#: evidence fits noisy training labels. Measured with ``benchmarks/vs_peers.py`` on flare_solar (100 rows,
#: 20 splits): M = 100, 64, 50, 33 and 20 give test error 0.405, 0.399, 0.401, 0.384 and 0.376 and Brier
#: score 0.235, 0.235, 0.232, 0.228 and 0.225; on 100-150 synthetic rows (half moons, circles, an
#: 8-feature problem with flipped labels; 3 seeds) M = N // 3 is within 0.002 of M = 64.
ROWS_PER_INDUCING = 3

#: ``kernel=None``, ``optimize_inducing=None``: svi fits of at least this many rows use the ARD kernel with a
#: constant and move their inducing points by ML-II, all other fits "rbf" (svi: at the k-means centres).
#: Measured with ``benchmarks/vs_peers.py``'s splits (5 each, error / Brier score): from 700 rows on, against
#: the RBF kernel at the centres, xor 0.113 / 0.106 -> 0.062 / 0.066, classif_sparse 0.222 / 0.161 -> 0.097 /
#: 0.075, digits_odd_even 0.053 / 0.038 -> 0.028 / 0.020, classif_imbalanced 0.033 / 0.031 -> 0.026 / 0.023,
#: german 0.251 -> 0.238, usps_3vs5 0.044 / 0.035 -> 0.041 / 0.031, the moons and toenail the same, circles
#: 0.117 -> 0.124; splice (2093 rows) 0.113 -> 0.051. Below it they do not pay: diabetis (537 rows) the same,
#: wisconsin (478) 0.035 -> 0.037, wdbc (398) 0.033 -> 0.050, heart (189) 0.185 -> 0.207, where ML-II of one
#: length-scale per feature and of the points' coordinates fits the few training rows. Second fits take
#: 2-3 times longer (at least 1000 steps, :data:`SVI_MIN_STEPS`): 0.35-0.45 s on 700-1400 rows of up to
#: 64 features at load 2-5, against GPC's 0.9-25 s there; the first fit (a fresh process) on 1000 rows of
#: 20 features 3.1-3.4 s against 2.7-2.8 s at load 1 (compilation 2.7 s against 2.3 s).
ARD_MIN_ROWS = 600
#: A calibrated fit learns its link on at most this many training rows (a seeded subset of whole groups of
#: repeated rows, :func:`~bayes_maxmargin.core.predict.link_rows`).
LINK_ROWS = 20_000
#: Folds of ``calibrate="cv"``. Measured on the first 5 splits of ``benchmarks/vs_peers.py``, test Brier score
#: of the leave-one-out link on f (``calibrate=True``) -> held-out moments, link on f -> held-out moments, link
#: on the margin (``"cv"``): ECM on ionosphere 0.063 -> 0.064 -> 0.050 (the leave-one-out moments with a
#: link on the margin: 0.049), sonar 0.102 -> 0.103 -> 0.098, flare_solar 0.236 -> 0.222 -> 0.223 (0.234);
#: svi on ionosphere 0.065 -> 0.065 -> 0.061, flare_solar 0.231 -> 0.219 -> 0.220, breast_cancer, heart and
#: sonar the same to 0.001. The held-out moments matter where ML-II fits the training rows closely
#: (flare_solar), the margin where the link on f, a f + b, overstates the confidence of points with a large
#: predictive variance (ionosphere).
CV_FOLDS = 5
#: ``inference=None``: the full GP (ECM, its link cross-fitted) on at most this many training rows, svi above
#: (:func:`default_inference`). Measured with ``benchmarks/vs_peers.py --suite all`` (20 splits; leukemia 10),
#: test error / Brier score over the best of GPC, GPJax's SVGP and SVC + Platt, ECM with ``calibrate="cv"``
#: against svi: ionosphere (245 rows, 34 features) 1.09 / 1.15 against 1.42 / 1.44, sonar (145, 60) 0.90 /
#: 0.97 against 1.46 / 1.41, leukemia (50, 7129) 1.00 / 0.81 against 2.67 / 2.31, crabs (140) 3.50 / 0.44
#: against 7.50 / 1.01 (a few test errors in all), breast_cancer, flare_solar, heart and p53_proxy within 0.05
#: of svi's either way. On wdbc (398 rows) svi keeps the lower error (0.99 against 1.13), and ECM's N^3 grows
#: costly (usps_3vs5, 1078 rows: a second fit of 20 s against GPC's 0.8 s).
FULL_GP_MAX_ROWS = 300


def _is_cv(value: Any) -> bool:
    """Whether ``calibrate`` is ``"cv"``."""
    return isinstance(value, str) and value == "cv"


def _check_mlii_criterion(value: Any, method: GPMethod) -> str:
    """``mlii_criterion`` checked against the method's :attr:`GPMethod.criteria`, None replaced by the
    first of them."""
    if value is None:
        return method.criteria[0]
    value = check_option("mlii_criterion", value, MLII_CRITERIA)
    if value not in method.criteria:
        able = GP_METHODS.names(lambda m: value in m.criteria)
        raise InvalidParameterError(
            f"mlii_criterion={value!r} applies to inference={', '.join(map(repr, able))}, not "
            f"inference={method.name!r} (which learns the kernel by its ELBO or samples it)")
    return value


def _mlii_prior(theta0: Any, learn: tuple[str, ...], params: GPSettings) -> KernelPrior | None:
    """The prior that ECM / FITC's ML-II adds to its criterion: for ``mlii_criterion="loo"`` the log-normal
    prior of the samplers (centred at the initial kernel parameters, ``kernel_prior_scale``), since the
    leave-one-out log predictive of separable training data grows without bound with the amplitude (and
    the length-scale), as log Z of eq. (9) does not; None for ``"evidence"``, the paper's ML-II."""
    return _kernel_prior(theta0, params.kernel_prior_scale, learn) if params.mlii_criterion == "loo" else None


def _check_mlii_tol(value: Any, method: GPMethod) -> float | None:
    """``mlii_tol`` checked, "auto" replaced by the method's :attr:`GPMethod.mlii_tol`."""
    if isinstance(value, str):
        if value != "auto":
            raise InvalidParameterError(f"Invalid value for mlii_tol: {value!r} (must be a number >= 0, 'auto' or None)")
        return method.mlii_tol
    return check_scalar_param("mlii_tol", value, low=0.0, allow_none=True)


#: ``max_iter=None`` for svi: 20 epochs, within [SVI_MIN_STEPS, 100 000] steps; the lower bound is the
#: larger where ML-II learns more than two kernel numbers (an ARD length-scale per feature takes more of
#: its Adam steps). Measured with ``benchmarks/vs_peers.py``: with the RBF kernel (64 kept k-means
#: centres, at most N // 3) 250 steps give the error and Brier score of 500 on heart, breast_cancer,
#: flare_solar, diabetis and german (20 splits, to 0.003 and 0.002) in 55-60 % of the time, and on the
#: moons 280 steps (20 epochs) those of 500 to 0.0011 and 0.0003 (12 splits); with ARD on splice (60
#: features), 0.082 error after 500 steps against 0.056 after 1000.
SVI_MIN_STEPS = {"few": 250, "many": 1000}


def inducing_memory(inference: str | GPMethod, n: int, m: int, batch: int, dtype: Any) -> int:
    """Bytes of the matrices (:attr:`GPMethod.inducing_matrices`) of one ``inference="fitc"`` or ``"svi"``
    fit on ``n`` rows with ``m`` inducing points and minibatches of ``batch`` rows, in ``dtype``.

    Examples
    --------
    >>> inducing_memory("fitc", 3000, 1500, 100, "float64") / 1e6  # 18 N x M and 22 M x M matrices
    1044.0
    """
    rows = {"nm": n, "mm": m, "bm": batch, "lm": min(n, LINK_ROWS)}
    counts = _as_method(inference).inducing_matrices
    return matrix_bytes([(count, rows[shape], m) for shape, count in counts.items()], dtype)


def memory_advice(inference: str | GPMethod, n: int, available: int, *, classes: int = 1,
                  precision: str | None = None, num_inducing: int | None = None,
                  batch_size: int | None = None) -> str:
    """What fits a GPBSVM on ``n`` rows in ``available`` bytes, for the memory refusal of ``inference``.

    From the estimates the guard itself uses (:attr:`GPMethod.dense_buffers` with
    :func:`~bayes_maxmargin.core.memory.dense_bytes`, :func:`inducing_memory`), ``classes`` one-vs-rest
    problems together: ECM where its dense matrices fit; FITC with the largest ``num_inducing`` that fits;
    svi with the largest ``num_inducing`` at its ``batch_size`` (the refused svi fit's, else the default
    min(100, N)) and, for a refused svi fit or where no num_inducing fits, the largest ``batch_size`` at its
    ``num_inducing`` (else one inducing point). Each in ``precision``, or the method's default precision
    where it is None. Where nothing fits, it says so and names the number of training points to lower.

    Examples
    --------
    >>> for option in memory_advice("ecm", 30_000, 4 * 10**9).split(" or "):  # 4 GB; svi in its float32
    ...     print(option)
    inference='fitc' with num_inducing <= 893
    inference='svi' with num_inducing <= 4469 (batch_size=100) fit in this memory
    """
    full, sparse, streaming = (next(m for m in GP_METHODS.values() if chosen(m)) for chosen in (
        lambda m: m.mlii and m.dense_buffers is not None, lambda m: m.inducing_matrices and not m.streams,
        lambda m: m.streams))
    refused = _as_method(inference)

    def fits(method: GPMethod, m: int, batch: int) -> bool:
        need = inducing_memory(method, n, m, batch, precision or method.precision)
        return classes * need <= available

    options = []
    if refused is not full and dense_bytes(n, precision or full.precision, full.dense_buffers, classes) <= available:
        options.append(f"inference={full.name!r}")
    m = largest_fitting(lambda k: fits(sparse, k, 1), n)
    if m:
        options.append(f"inference={sparse.name!r} with num_inducing <= {m}")
    svi_m = num_inducing if refused is streaming and num_inducing else default_svi_inducing(n)
    svi_batch = batch_size if refused is streaming and batch_size else min(DEFAULT_BATCH, n)
    m = largest_fitting(lambda k: fits(streaming, k, svi_batch), n)
    if m:
        options.append(f"inference={streaming.name!r} with num_inducing <= {m} (batch_size={svi_batch})")
    if refused is streaming or not m:  # smaller minibatches at its num_inducing, or at one inducing point
        at = svi_m if m else 1
        batch = largest_fitting(lambda k: fits(streaming, at, k), svi_batch)
        if batch:
            options.append(f"inference={streaming.name!r} with batch_size <= {batch} (num_inducing={at})")
    if not options:
        return (f"no inference method fits N = {n} points in this memory, not even inference='fitc' or 'svi' with "
                "num_inducing=1 and batch_size=1: lower the number of training points")
    return " or ".join(options) + (" fits" if len(options) == 1 else " fit") + " in this memory"


def _as_method(inference: str | GPMethod) -> GPMethod:
    """The method ``inference`` names in :data:`GP_METHODS`, or ``inference`` itself where it is a method (of
    a registry of one's own, see the architecture guide)."""
    return inference if isinstance(inference, GPMethod) else GP_METHODS[inference]


def _rows(X: Any) -> int:
    """The number of rows of ``X`` before it is validated (0 where it has none: the validation names the
    problem)."""
    try:
        return _num_samples(X)
    except TypeError:
        return 0


def default_inference(n: int) -> str:
    """The inference method of ``GPBSVM(inference=None)`` on ``n`` training rows: the full GP by ECM with
    the cross-fitted link (``calibrate="cv"`` where ``calibrate=None``) on at most
    :data:`FULL_GP_MAX_ROWS` rows, S-BSVM ("svi") above.

    Examples
    --------
    >>> default_inference(245), default_inference(398)
    ('ecm', 'svi')
    """
    return "ecm" if n <= FULL_GP_MAX_ROWS else "svi"


def default_svi_inducing(n: int) -> int:
    """The number of inducing points of ``GPBSVM(inference="svi", num_inducing=None)`` on ``n`` rows:
    :data:`DEFAULT_SVI_INDUCING`, or ``n //`` :data:`ROWS_PER_INDUCING` (at least 1) where that is smaller.

    Examples
    --------
    >>> default_svi_inducing(100), default_svi_inducing(189), default_svi_inducing(5000), default_svi_inducing(2)
    (33, 63, 64, 1)
    """
    return min(DEFAULT_SVI_INDUCING, max(1, n // ROWS_PER_INDUCING))


def default_svi_steps(n: int, batch_size: int, n_kernel: int) -> int:
    """The number of steps of ``GPBSVM(inference="svi", max_iter=None)`` on ``n`` rows in minibatches of
    ``batch_size`` when ML-II learns ``n_kernel`` kernel numbers (2 for the RBF kernel, d + 1 for ARD):
    20 epochs within :data:`SVI_MIN_STEPS` and 100 000.

    Examples
    --------
    >>> default_svi_steps(189, 100, 2), default_svi_steps(189, 100, 14), default_svi_steps(200_000, 100, 19)
    (250, 1000, 40000)
    """
    low = SVI_MIN_STEPS["few" if n_kernel <= 2 else "many"]
    return int(np.clip(20 * n // batch_size, low, 100_000))


def default_optimize_inducing(inference: str | GPMethod, n: int) -> bool:
    """Whether ``GPBSVM(optimize_inducing=None)`` moves the inducing points by ML-II on ``n`` rows: FITC
    always; svi from :data:`ARD_MIN_ROWS` rows on, and below them it keeps the k-means centres.

    Measured with ``benchmarks/vs_peers.py`` against moving them (svi, RBF kernel, 64 points): on heart,
    breast_cancer, flare_solar, diabetis and german (20 splits) test error lower on four and Brier score
    lower or equal on all five (breast_cancer error 0.265 -> 0.256), on the moons (1400 rows, 5 splits)
    Brier 0.069 -> 0.066, second fits 15-20 % shorter. On 150 half-moon rows moving them let ML-II
    shrink the amplitude to 0.2-0.5 and the test error vary from 0.14 to 0.22 over three seeds, against
    0.102 on each seed with the centres kept (GPC: 0.102). From :data:`ARD_MIN_ROWS` rows, with the ARD
    kernel, the moved points matter: kept centres raise the error on splice from 0.056 to 0.091 and on
    ringnorm from 0.017 to 0.058.

    Examples
    --------
    >>> default_optimize_inducing("svi", 189), default_optimize_inducing("svi", 5180)
    (False, True)
    """
    start = _as_method(inference).optimize_inducing_from
    return start is not None and n >= start


def default_kernel(inference: str | GPMethod, n: int) -> str | Kernel:
    """The kernel of ``GPBSVM(kernel=None)`` for ``n`` training rows: ``ARD() + Constant()`` for svi from
    :data:`ARD_MIN_ROWS` rows on, "rbf" otherwise.

    The constant term is the intercept of an SVM, a shift of f with its prior variance learnt by
    ML-II. Measured with ``benchmarks/vs_peers.py`` (5 splits) against ARD alone: test error on
    ringnorm 0.0170 -> 0.0162 and Brier score 0.0138 -> 0.0120 (its decision function is a quadric
    plus a constant), on splice 0.056 -> 0.054 and 0.045 -> 0.043, on waveform the same (0.082 and
    0.060); on 200 000 SUSY-like rows the same final error (0.208), ML-II taking the constant's
    variance to 0.001. With the RBF kernel it changed nothing beyond the split-to-split spread (heart,
    breast_cancer, flare_solar, diabetis, german: 20 splits; the moons).

    Examples
    --------
    >>> default_kernel("svi", 5180), default_kernel("svi", 189), default_kernel("ecm", 5180)
    (ARD() + Constant(), 'rbf', 'rbf')
    """
    start = _as_method(inference).ard_from
    return ARD() + Constant() if start is not None and n >= start else "rbf"


class GPBSVM(_BayesianSVMClassifier):
    """Nonlinear Bayesian SVM with a Gaussian-process prior (Henao et al. 2014).

    f ~ GP(0, k_theta), the hinge pseudo-likelihood exp(-2 gamma max(1 - y f, 0)) (``gamma0 = 0``)
    or the skewed Laplace of eq. (4-5) (``gamma0 > 0``), lambda_n ~ Exp(gamma0) in the augmented
    form (eq. 6), gamma fixed or ~ Ga(a0, b0).

    Multi-class: a y of K > 2 classes is fitted one-vs-rest, K binary problems "class k (+1) vs
    the rest (-1)" run together (:mod:`bayes_maxmargin.estimators.multiclass`: one vmapped ECM / FITC / VI
    / NUTS / SVI program, one Gibbs run over the stacked chains of all classes), each with its own
    kernel parameters (ML-II per class), link and key ``fold_in(key, k)``. ``predict_latent`` and
    ``decision_function`` then have one column per class, ``predict_proba`` holds the K probit
    probabilities normalised over the classes, ``predict`` the class of the largest margin;
    ``estimators_`` holds the K binary fits, the attributes below are theirs stacked along a
    leading class axis (lists where the shapes differ, e.g. ``support_``,
    ``dual_coef_``, ``kernel_params_``), and ``idata_`` has a ``class`` dimension.

    Parameters
    ----------
    kernel : {"rbf", "ard", "poly", "linear"}, Kernel or None, default=None
        Covariance function: the paper's squared exponential amplitude * exp(-||x - x'||^2 /
        lengthscale^2), its ARD version (one length-scale per feature), polynomial, linear, or a
        :class:`~bayes_maxmargin.core.kernels.Kernel` (:mod:`bayes_maxmargin.core.kernels`). None:
        ``ARD() + Constant()`` for svi on at least :data:`ARD_MIN_ROWS` (600) rows, where learning a
        length-scale per feature pays (on splice, xor and a 50-feature set with 5 informative ones it
        halves the test error) and the constant is a learnt intercept, and "rbf" for smaller data and
        the other inference methods (:func:`default_kernel`); ``kernel_`` holds the choice. Set it
        explicitly when fits on both sides of 600 rows are compared (e.g. cross-validation folds of an
        800-row set).
    inference : {"ecm", "fitc", "gibbs", "nuts", "vi", "svi"} or None, default=None
        ECM for the MAP of (f, gamma) with ML-II kernel learning (Sec. 3, eq. 8-9); the same under
        the FITC approximation with ``num_inducing`` pseudo-inputs (eq. 10); the conjugate Gibbs
        sampler (eq. 7); NUTS on the marginal program (the reference); or the variational
        inference of Wenzel et al. (2017): batch coordinate ascent on q(f) q(lambda) for the full
        GP ("vi", B-BSVM, Sec. 4.1, kernel fixed) and natural-gradient stochastic VI with
        ``num_inducing`` inducing points ("svi", S-BSVM, Alg. 1), minibatches streamed from host
        memory, ML-II on the kernel (``learn_kernel``) and the inducing locations
        (``optimize_inducing``) every ``mlii_every`` steps (eq. 12). vi and svi use the hinge
        (gamma0 = 0) with gamma fixed. None (:func:`default_inference`; ``inference_`` holds the choice):
        ECM with the cross-fitted link (``calibrate="cv"``) on at most :data:`FULL_GP_MAX_ROWS` (300)
        training rows, where the full GP costs little and predicts better than a few inducing points
        of an isotropic kernel on wide data (:data:`FULL_GP_MAX_ROWS` gives the measurements), and svi
        above, with min(64, N // 3) inducing points: it predicts as well as or better than the full-GP
        ECM on the larger sets of ``benchmarks/vs_peers.py`` (ECM's ML-II can pick a kernel that fits
        noisy training labels almost exactly: on one diabetis split 0.6 % training and 33 % test error,
        against 24-26 % for svi), its time grows linearly in N, and its second fits take seconds at any
        size. Set it explicitly when fits on both sides of 300 rows are compared (e.g. the
        cross-validation folds of a 400-row set).
    kernel_params : dict or None
        Initial (ECM / FITC with ``learn_kernel``) or fixed kernel parameters, e.g.
        ``{"lengthscale": 3.0, "amplitude": 1.0}``; fields not given take the defaults:
        length-scale(s) at the median distance between training points, unit amplitude, degree 2,
        offset 1, unit variance.
    learn_kernel : bool or sequence of str
        Which kernel parameters are learnt: all positive fields (True), none (False), or the named ones
        (e.g. ``("lengthscale",)``: the paper's SE has no amplitude; paths such as ``"k1__lengthscale"``
        for a composed kernel); the others stay at their initial values. ECM / FITC / svi: by ML-II.
        Gibbs / NUTS: sampled under independent log-normal priors centred at their initial values
        (:func:`~bayes_maxmargin.models.gp.model.kernel_prior`, standard deviation ``kernel_prior_scale``
        in log space; Gibbs by slice sampling, :mod:`~bayes_maxmargin.models.gp.gibbs_theta`).
    kernel_prior_scale : float
        Gibbs / NUTS with ``learn_kernel``, and ECM / FITC with ``mlii_criterion="loo"``: standard deviation
        of log theta under its log-normal prior centred at the initial kernel parameters.
    theta_sampler : {"collapsed", "surrogate"}, default="collapsed"
        Gibbs with ``learn_kernel``: the slice step on theta given lambda and gamma. ``"collapsed"``
        integrates f out (one Cholesky factor per evaluation); ``"surrogate"`` is the surrogate-data slice
        sampler of Murray & Adams (2010) that Henao et al. (2014) use (two per evaluation). Both leave
        the posterior invariant; the collapsed one gave more effective draws of theta per second
        (:mod:`~bayes_maxmargin.models.gp.gibbs_theta`). The bracket widths adapt during the warm-up.
    marginal_moves : bool, default=True
        Gibbs only: add :data:`~bayes_maxmargin.core.augmentation.ELLIPTICAL_STEPS` elliptical slice
        updates of f with lambda integrated out to each sweep
        (:func:`~bayes_maxmargin.core.augmentation.elliptical_moves`), then draw lambda given the moved f.
        The sweep keeps its exact target; the updates cost O(N^2) each against the sweep's O(N^3), and
        raise f's effective draws per draw (iris, class 2 against the rest, theta fixed: from 0.09 to
        0.29).
    gamma : float
        Hinge scale (fixed), or the initial value when ``gamma_prior`` is given.
    gamma_prior : (float, float) or None
        Shape and rate (a0, b0) of a Gamma prior on gamma; None keeps gamma fixed. ECM / FITC need
        a0 > 1.
    gamma0 : float or None
        Rate of the exponential prior on lambda; 0 is the hinge. None: 0 for ECM and FITC (sparse
        alpha, eq. 13), the paper's 0.1 for Gibbs and NUTS. With ``gamma0_prior``: the chains'
        initial gamma0 (0: the prior mean).
    gamma0_prior : (float, float) or None
        Gibbs only: shape and rate of a Gamma prior on gamma0, the conjugate prior Henao et al. (2014)
        mention instead of fixing gamma0 = 0.1; gamma0 is then sampled from its conditional
        Ga(shape + N, rate + sum_n lambda_n) (:func:`~bayes_maxmargin.core.augmentation.gamma0_conditional`)
        and its draws are ``idata_.posterior["gamma0"]``. None keeps gamma0 fixed.
    max_iter : int or None
        ECM iterations in all (ECM, FITC; the paper uses 200), coordinate-ascent sweeps (vi), or
        natural-gradient steps (svi). None: 200, and for svi 20 epochs (at least 250 steps where ML-II
        learns at most two kernel numbers, as for the RBF kernel, 1000 otherwise, at most 100 000;
        :func:`default_svi_steps`). An ECM or FITC fit whose final run uses them all with the objective
        still changing by more than ``tol`` warns (``ConvergenceWarning``).
    mlii_every : int or None, default=None
        ECM iterations between ML-II steps (None: 20, as Henao et al.); svi: natural-gradient steps
        per ML-II step and per ELBO estimate (None: 5; Wenzel et al. leave it open, with 10 in their
        code: more frequent Adam steps learn the kernel and the inducing points within the default
        number of steps; two half moons, 1400 rows: test error 0.098 with 20, 0.091 with 5).
    mlii_steps : int
        Optimiser iterations per ML-II step.
    optimizer : {"lbfgs", "adam"}
        Optax optimiser of ML-II: L-BFGS with a line search (few iterations suffice for the
        handful of kernel parameters) or Adam.
    learning_rate : float
        Adam step size in log kernel parameters (and in pseudo-inputs over the spread of X: ML-II's steps
        do not depend on the units of X); svi always uses Adam for its ML-II steps.
    tol : float
        Relative-change tolerance of each ECM run.
    mlii_tol : float, "auto" or None, default="auto"
        ECM, FITC: stop the optimiser iterations of an ML-II step once one raises log Z (eq. 9 / 10)
        by at most ``mlii_tol`` relative to it, and the ML-II rounds after the first step that does;
        the final ECM run, to ``tol``, follows as always. None: all ``max_iter // mlii_every`` rounds
        run their ``mlii_steps`` iterations (the paper's schedule). "auto": 1e-4 for ECM (several
        times faster on a few hundred to a few thousand rows, the same predictions to about 1e-2 in
        probability), None for FITC.
    mlii_criterion : {"evidence", "loo"} or None, default=None
        ECM, FITC: what ML-II maximises over the kernel parameters at the E-step's lambda and gamma;
        None: "loo" for ECM, "evidence" for FITC (:attr:`GPMethod.criteria` in :data:`GP_METHODS`, which
        gives the measurements). ``"evidence"``: log Z of eq. (9) / (10), the paper's. ``"loo"``: the
        leave-one-out log predictive probability ``sum_n log Phi(y_n m_n / sqrt(1 + s_n))`` of the same
        Gaussian given lambda, with ``(m_n, s_n)`` the leave-one-out mean and variance of f_n
        (:func:`~bayes_maxmargin.models.gp.ecm.gp_loo_log_predictive`; Sundararajan & Keerthi 2001).
        Eq. (9) at the E-step's lambda rewards kernels that interpolate the points near the margin and
        can overfit (on diabetis: length-scales a third of GPC's, test error 0.30 against 0.23; with
        ``"loo"`` 0.23). On separable training labels the leave-one-out criterion alone grows without
        bound with the amplitude, so ``"loo"`` adds the log-normal prior of ``kernel_prior_scale`` around
        the initial kernel parameters (MAP-II; on crabs the amplitude otherwise reached 2e14 and every
        prediction 0.5). The model and its posterior given the kernel are the paper's either way.
    solver : {"interior_point", "fixed_point"}, default="interior_point"
        ECM with the hinge and gamma fixed (``gamma0=0``, ``gamma_prior=None``), whose fixed point at
        the final kernel parameters is the MAP of f, a kernel SVM: ``"interior_point"`` solves that last
        f-step exactly (:func:`~bayes_maxmargin.models.gp.ecm.gp_map`: the interior-point method with an
        active-set crossover of ``LinearBSVM``'s EM, stopped when the duality gap is at most ``tol``
        max(P, 1); 10-20 steps of one N x N Cholesky each where ECM iterates tens of SQUAREM cycles
        and still stops short of the margin); the ML-II rounds stay ECM's. ``"fixed_point"``: the
        paper's ECM to the end. FITC, ``gamma_prior`` and ``gamma0 > 0`` always iterate ECM.
    accelerate : bool, default=True
        ECM, FITC: run every ECM run as SQUAREM cycles of three ECM iterations (the same fixed point and
        monotone objective, reached in several times fewer iterations; ``max_iter`` and ``mlii_every``
        still count ECM iterations, ``objective_`` and ``n_iter_`` count cycles). False: the paper's
        plain ECM iterations, whose final run of ``max_iter`` iterations stops short of the fixed point
        where ECM crawls near the hinge (ECM second fits of 189-1400 rows 10-45 % longer).
    num_inducing : int or None
        FITC, svi: number M of pseudo-inputs / inducing points, 1 <= M <= N; None: min(100, N) for
        FITC, min(64, N // 3) for svi, at least 1 (:func:`default_svi_inducing`).
    inducing : {"kmeans", "random"}
        FITC, svi: initial pseudo-inputs, k-means++ centres (scikit-learn ``KMeans``;
        ``MiniBatchKMeans`` on a subsample above 50 000 rows) or a random subset of the rows, chosen among
        the distinct rows: where the training data have at most ``num_inducing`` distinct rows (repeated
        inputs), the pseudo-inputs are all of them, each once, fewer than ``num_inducing``
        (:func:`~bayes_maxmargin.models.gp.model.init_inducing`).
    optimize_inducing : bool or None, default=None
        FITC, svi: whether ML-II also moves the pseudo-inputs. None: FITC moves them; svi moves them
        from 600 training rows on and keeps the k-means centres below (:func:`default_optimize_inducing`).
    batch_size : int or None
        svi: minibatch size ``|S|``, 1 <= ``|S|`` <= N (the paper: 10 on its benchmark sets, 100 on
        SUSY); None: min(100, N).
    step_size : float, Optax schedule, "robbins_monro" or "adaptive"
        svi: the natural-gradient step rho_t of Alg. 1, in (0, 1]: a constant, a schedule
        t -> rho_t, Robbins-Monro (t + 10)^-0.55, or the adaptive rate of Ranganath et al. (2013).
    devices : int or None
        svi: split every minibatch across this many devices (None: all visible devices, with
        ``jax.distributed`` those of every process; the batch size must be a multiple of their
        number).
    num_samples : int or None, default=None
        Kept draws per chain (MCMC). None: 2000 for Gibbs, whose effective draws per draw with theta
        sampled are 0.14-0.22 and whose default check of R-hat <= 1.01 over every value of f needs about
        1000 effective draws of each (:attr:`GPMethod.num_samples`), 1000 for NUTS.
    num_warmup, num_chains, thin : int
        Warm-up iterations, chains, iterations per kept draw (MCMC).
    jitter : float
        Diagonal jitter of the prior covariance, K + jitter I.
    precision : {"float64", "float32"} or None, default=None
        Floating-point precision (local; the global JAX setting is untouched). None: float32 for svi
        (:attr:`GPMethod.precision`), float64 for the other inference methods.
    progress_bar : bool
        Show the fit's progress on stderr ("compiling", then iterations) once it has run for a second,
        for every inference method (:mod:`bayes_maxmargin.core.progress`).
    calibrate : bool, "cv" or None, default=None
        Learn the probit link P(y = +1 | f) = Phi(a f + b) of the predictive (``link_``): the (a, b)
        that best predict each training label from the leave-one-out predictive of its f (True), or
        from its cross-fitted predictive (``"cv"``). True: the leave-one-out predictive, which the
        Gaussian posterior of ECM, FITC, vi and svi gives without refitting (each point's Gaussian
        site divided out, :func:`~bayes_maxmargin.core.predict.loo_cavity`; (a, b) by
        :func:`~bayes_maxmargin.core.predict.fit_probit_link`; on at most 20 000 rows, a seeded subset). The
        hinge sets the scale of f by the margin, not by the link, so the papers' Phi(f) can be
        over- or under-confident; the learnt link lowers the Brier score, log loss and calibration
        error on the sets of ``benchmarks/vs_peers.py``. b also moves the decision threshold
        (``predict`` is the class of probability above 1/2). Rows that repeat an input are left out with
        all their twins; where the twins alone move the link beyond its sampling error, the fit warns and
        keeps Phi(f). ``"cv"``: the estimator is fitted again without a link on the rows outside each
        of :data:`CV_FOLDS` folds (ECM, FITC and svi at the kernel parameters ML-II chose,
        :meth:`_fold_settings`), and a link on the probit margin, P(y = +1) = Phi(a m / sqrt(1 + v) + b),
        learnt from the margins at each fold's rows (:meth:`_cross_fit_link`; folds stratified, repeated
        inputs held out together, :func:`~bayes_maxmargin.data.splits.cross_fit_folds`): Platt scaling of
        ``decision_function`` as scikit-learn's ``CalibratedClassifierCV(ensemble=False)``, with the
        probit. Five more fits, for any inference method, whose f never saw the rows it predicts (the
        leave-one-out moments leave one site out of a posterior that every row shaped). :data:`CV_FOLDS`
        gives the measurements of both choices, the held-out moments and the link on the margin.
        None: ``"cv"`` where ``inference=None`` chose ECM (:func:`default_inference`; True, with a warning,
        where a class has too few distinct rows to hold out), True for ECM, FITC, vi and svi otherwise,
        False (Phi(f), the papers' predictive, eq. 11) for Gibbs and NUTS, for which True is an error.
    random_state : int, RandomState, JAX PRNG key or None
        Seed of the sampler and of the pseudo-input initialisation.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    inference_ : str
        The inference method fitted: ``inference``, or the one ``inference=None`` stands for.
    kernel_ : str or Kernel
        The covariance function fitted: ``kernel``, or the one ``kernel=None`` stands for.
    estimators_ : list of GPBSVM
        K > 2 classes only: the binary fits, ``estimators_[k]`` for ``classes_[k]`` vs rest.
    kernel_params_ : dict
        Final kernel parameters (after ML-II) or the fixed ones.
    gamma_ : float
        MAP, posterior mean or fixed gamma.
    f_ : ndarray of shape (n_samples,)
        MAP (ECM, FITC) or posterior mean (MCMC) of f at the training inputs.
    alpha_ : ndarray of shape (n_samples,)
        Representer weights of the predictive mean: E[f_*] = sum_n alpha_n k(x_*, x_n) (eq. 12;
        under FITC with k replaced by the Nystrom kernel Q). For MCMC, alpha = K^-1 E[f].
    support_ : ndarray of int
        Support vectors of eq. (13): the training points with y_n f_n <= 1 + 1e-3 (inside or on
        the margin). Under ECM with gamma0 = 0 they are exactly the points with alpha_n != 0.
    support_vectors_ : ndarray of shape (n_SV, n_features)
    dual_coef_ : ndarray of shape (1, n_SV)
        ``alpha_[support_]``: y_n gamma (1 + c) inside the margin, eq. (13) (exact for ECM with
        gamma0 = 0; a truncation otherwise).
    inducing_points_ : ndarray of shape (M, n_features)
        FITC, svi: the final pseudo-inputs; M = ``num_inducing``, or the number of distinct training rows
        where that is smaller.
    variational_mean_, variational_cov_ : ndarray
        svi: mu and zeta of q(u) = N(mu, zeta) at the inducing points.
    elbo_ : ndarray
        vi: the ELBO after every sweep; svi: minibatch estimates of eq. (8) (scaled by N / ``|S|``)
        every ``mlii_every`` steps, at ``elbo_steps_``.
    f_, alpha_, support_ ... : svi does not define the training-set attributes ``f_``,
        ``alpha_``, ``support_``, ``support_vectors_``, ``dual_coef_`` (N may be in the millions).
    objective_ : ndarray
        ECM / FITC: the log posterior after every ECM iteration, all rounds concatenated (it never
        decreases within a round; it jumps when ML-II moves theta).
    log_z_ : ndarray of shape (n_rounds, 2)
        ECM / FITC: ML-II's criterion (``mlii_criterion``: log Z of eq. 9 / 10, or the leave-one-out log
        predictive probability) before and after each ML-II step.
    idata_ : xarray.DataTree
        ArviZ's DataTree. Draws of f (and gamma, gamma0, theta when sampled) for MCMC; for ECM, FITC
        and VI independent draws of f from the marginals of its Gaussian at the training inputs, for SVI
        of u from q(u) (``posterior.attrs["approximation"]`` says which), with the kernel parameters (and
        an estimated gamma) in ``constant_data``; sample_stats with the log joint, the objective or the ELBO;
        log_likelihood when gamma0 > 0 or ``gamma0_prior`` is given.
    n_iter_ : int
        ECM iterations run, or MCMC iterations per chain (warm-up included).
    link_ : ndarray of shape (2,)
        (a, b) of the predictive's link Phi(a f + b): P(y = +1) = Phi((a m + b) / sqrt(1 + a^2 v))
        for f ~ N(m, v); (1, 0) without ``calibrate``. With ``calibrate="cv"`` a link on the margin
        (``link_input_``): P(y = +1) = Phi(a m / sqrt(1 + v) + b).
    link_input_ : {"margin"}
        ``calibrate="cv"`` only: the link acts on the probit margin m / sqrt(1 + v); absent, it acts on f.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from bayes_maxmargin import GPBSVM
    >>> X, y = make_moons(n_samples=60, noise=0.2, random_state=0)
    >>> clf = GPBSVM(kernel="rbf", inference="ecm", max_iter=60, progress_bar=False).fit(X, y)
    >>> sorted(clf.kernel_params_)  # learnt by ML-II
    ['amplitude', 'lengthscale']
    >>> bool(0 < clf.support_.size < len(X))  # the support vectors of eq. (13)
    True
    >>> mean, var = clf.predict_latent(X[:3])
    >>> mean.shape, bool((var > 0).all())
    ((3,), True)
    """

    def __init__(
        self,
        kernel: str | Kernel | None = None,
        inference: str | None = None,
        *,
        kernel_params: Mapping[str, Any] | None = None,
        learn_kernel: bool | tuple[str, ...] = True,
        kernel_prior_scale: float = 1.0,
        theta_sampler: str = "collapsed",
        marginal_moves: bool = True,
        gamma: float = 1.0,
        gamma_prior: tuple[float, float] | None = None,
        gamma0: float | None = None,
        gamma0_prior: tuple[float, float] | None = None,
        max_iter: int | None = None,
        mlii_every: int | None = None,
        mlii_steps: int = 10,
        optimizer: str = "lbfgs",
        learning_rate: float = 0.05,
        tol: float = 1e-10,
        mlii_tol: float | str | None = "auto",
        mlii_criterion: str | None = None,
        solver: str = "interior_point",
        accelerate: bool = True,
        num_inducing: int | None = None,
        inducing: str = "kmeans",
        optimize_inducing: bool | None = None,
        batch_size: int | None = None,
        step_size: Any = "robbins_monro",
        devices: int | None = None,
        num_samples: int | None = None,
        num_warmup: int = 500,
        num_chains: int = 4,
        thin: int = 1,
        jitter: float = 1e-6,
        precision: str | None = None,
        progress_bar: bool = True,
        calibrate: bool | None = None,
        random_state: Any = None,
    ) -> None:
        self.kernel = kernel
        self.inference = inference
        self.kernel_params = kernel_params
        self.learn_kernel = learn_kernel
        self.kernel_prior_scale = kernel_prior_scale
        self.theta_sampler = theta_sampler
        self.marginal_moves = marginal_moves
        self.gamma = gamma
        self.gamma_prior = gamma_prior
        self.gamma0 = gamma0
        self.gamma0_prior = gamma0_prior
        self.max_iter = max_iter
        self.mlii_every = mlii_every
        self.mlii_steps = mlii_steps
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.tol = tol
        self.mlii_tol = mlii_tol
        self.mlii_criterion = mlii_criterion
        self.solver = solver
        self.accelerate = accelerate
        self.num_inducing = num_inducing
        self.inducing = inducing
        self.optimize_inducing = optimize_inducing
        self.batch_size = batch_size
        self.step_size = step_size
        self.devices = devices
        self.num_samples = num_samples
        self.num_warmup = num_warmup
        self.num_chains = num_chains
        self.thin = thin
        self.jitter = jitter
        self.precision = precision
        self.progress_bar = progress_bar
        self.calibrate = calibrate
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _precision(self) -> str:
        """``precision``, None replaced by the inference method's (:attr:`GPMethod.precision`)."""
        if getattr(self, "precision", None) is None:
            method = self._method()
            return method.precision if method is not None else "float64"
        return super()._precision()

    def _inference(self) -> Any:
        """``inference``, None replaced by the choice of the last fit (``inference_``, :func:`default_inference`)."""
        return self.inference if self.inference is not None else vars(self).get("inference_")

    def _method(self) -> GPMethod | None:
        """The method :meth:`_inference` names in the estimator's registry, None for any other value."""
        return self._METHODS.lookup(self._inference())

    def _cross_fits(self) -> bool:
        """Whether the fit learns its link from refits (``calibrate="cv"``, or ``calibrate=None`` where
        ``inference=None`` chose the full GP)."""
        method = self._method()
        default = self.calibrate is None and self.inference is None and method is not None and not method.streams
        return _is_cv(self.calibrate) or default

    def _checked_params(self) -> GPSettings:
        method = self._METHODS.check(self._inference())
        inference = method.name
        p: dict[str, Any] = {
            "method": method,
            "kernel": None if self.kernel is None else _check_kernel(self.kernel),
            "precision": self._precision(),
            "inducing": check_option("inducing", self.inducing, ("kmeans", "random")),
            "optimizer": check_option("optimizer", self.optimizer, ML2_OPTIMIZERS),
            "gamma": check_scalar_param("gamma", self.gamma, low=0.0, low_inclusive=False),
            "gamma0": check_scalar_param("gamma0", self.gamma0, low=0.0, allow_none=True),
            "max_iter": check_scalar_param("max_iter", self.max_iter, kind="int", low=1, allow_none=True),
            "mlii_every": check_scalar_param("mlii_every", self.mlii_every, kind="int", low=1, allow_none=True),
            "batch_size": check_scalar_param("batch_size", self.batch_size, kind="int", low=1, allow_none=True),
            "devices": check_scalar_param("devices", self.devices, kind="int", low=1, allow_none=True),
            "mlii_steps": check_scalar_param("mlii_steps", self.mlii_steps, kind="int", low=0),
            "learning_rate": check_scalar_param("learning_rate", self.learning_rate, low=0.0, low_inclusive=False),
            "tol": check_scalar_param("tol", self.tol, low=0.0),
            "mlii_tol": _check_mlii_tol(self.mlii_tol, method),
            "mlii_criterion": _check_mlii_criterion(self.mlii_criterion, method),
            "solver": check_option("solver", self.solver, ("interior_point", "fixed_point")),
            "num_inducing": check_scalar_param("num_inducing", self.num_inducing, kind="int", low=1, allow_none=True),
            "num_samples": check_scalar_param("num_samples", self.num_samples, kind="int", low=1, allow_none=True),
            "num_warmup": check_scalar_param("num_warmup", self.num_warmup, kind="int", low=0),
            "num_chains": check_scalar_param("num_chains", self.num_chains, kind="int", low=1),
            "thin": check_scalar_param("thin", self.thin, kind="int", low=1),
            "jitter": check_scalar_param("jitter", self.jitter, low=0.0),
            "kernel_prior_scale": check_scalar_param(
                "kernel_prior_scale", self.kernel_prior_scale, low=0.0, low_inclusive=False
            ),
            "theta_sampler": check_option("theta_sampler", self.theta_sampler, THETA_SAMPLERS),
            "gamma_prior": _check_gamma_prior(self.gamma_prior, needs_mode=method.mode),
        }
        p["gamma0_prior"] = _check_gamma0_prior(self.gamma0_prior, method)
        if p["gamma0"] is None:
            p["gamma0"] = method.gamma0
        if p["mlii_every"] is None:
            p["mlii_every"] = method.mlii_every
        if method.hinge_only and (p["gamma0"] != 0.0 or p["gamma_prior"] is not None):
            raise InvalidParameterError(
                f"Invalid value for gamma0 / gamma_prior: inference={inference!r} fits the hinge model of "
                "Wenzel et al. (2017) with gamma fixed (gamma0=0, gamma_prior=None)"
            )
        if p["max_iter"] is None:
            p["max_iter"] = method.max_iter
        if p["num_samples"] is None:
            p["num_samples"] = method.num_samples
        if not isinstance(self.accelerate, (bool, np.bool_)):
            raise InvalidParameterError(f"Invalid value for accelerate: {self.accelerate!r} (must be a bool)")
        p["accelerate"] = bool(self.accelerate)
        if not isinstance(self.marginal_moves, (bool, np.bool_)):
            raise InvalidParameterError(f"Invalid value for marginal_moves: {self.marginal_moves!r} (must be a bool)")
        p["elliptical_steps"] = ELLIPTICAL_STEPS if self.marginal_moves else 0
        if self.optimize_inducing is not None and not isinstance(self.optimize_inducing, (bool, np.bool_)):
            raise InvalidParameterError(
                f"Invalid value for optimize_inducing: {self.optimize_inducing!r} (must be a bool or None)"
            )
        p["optimize_inducing"] = self.optimize_inducing
        if not (self.calibrate is None or isinstance(self.calibrate, (bool, np.bool_)) or _is_cv(self.calibrate)):
            raise InvalidParameterError(
                f"Invalid value for calibrate: {self.calibrate!r} (must be a bool, 'cv' or None)")
        if self.calibrate is True and not method.calibrates:
            able = ", ".join(self._METHODS.names(lambda m: m.calibrates))
            raise InvalidParameterError(
                f"Invalid value for calibrate: True with inference={inference!r}; the link is learnt from the "
                f"leave-one-out moments of a Gaussian posterior ({able}); calibrate='cv' learns it from refits on "
                f"{CV_FOLDS} folds with any inference method")
        p["calibrate"] = ("cv" if self._cross_fits() else method.calibrates if self.calibrate is None
                          else bool(self.calibrate))
        return GPSettings(**p)

    # ------------------------------------------------------------------ fitting
    @reports_progress
    def fit(self, X: Any, y: Any, *, checkpoint: Any = None, resume: Any = None) -> "GPBSVM":
        """Fit the MAP with ML-II (ECM, FITC) or the posterior at fixed theta (Gibbs, NUTS).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Two or more classes of any label type; K > 2 classes are fitted one-vs-rest.
        checkpoint, resume : path, optional
            Checkpoint folder written after every chunk of iterations (ECM and FITC: after every
            ECM + ML-II round and every chunk of the final ECM run), and a checkpoint of the same fit to
            continue from (as in :meth:`~bayes_maxmargin.estimators.linear.LinearBSVM.fit`; see
            :func:`~bayes_maxmargin.engine.mcmc.run_chains`, :func:`~bayes_maxmargin.engine.svi.run_svi`
            and :func:`~bayes_maxmargin.engine.resumable.run_resumable`); K > 2 classes in one
            checkpoint.

        Returns
        -------
        self
        """
        self.inference_ = self.inference if self.inference is not None else default_inference(_rows(X))
        cross_fit = self._cross_fits() and "_ovr_recorder" not in self.__dict__
        if cross_fit:  # the folds first: a class they cannot hold out is named before any fit
            Xc, yc = check_X_y(X, y, estimator_name="GPBSVM")
            folds = self._cross_fit_folds(Xc, yc)
        with limit_blas_threads(getattr(self._method(), "blas_threads", None)):
            self._fit_threads_set(X, y, checkpoint, resume)
            if cross_fit and folds is None:
                self._leave_one_out_links(Xc, yc)
            elif cross_fit:
                self._cross_fit_link(Xc, yc, folds)
            return self

    @staticmethod
    def _resolved(params: GPSettings, n: int) -> GPSettings:
        """``params`` with the defaults that depend on the ``n`` training rows filled in: the kernel, whether
        the inducing points move, their number and the minibatch size; an InvalidParameterError where
        ``num_inducing`` or ``batch_size`` exceeds the rows for a method that takes it."""
        method = params.method
        sizes = {}
        for name, applies in (("num_inducing", method.inducing_matrices is not None), ("batch_size", method.streams)):
            value = getattr(params, name)
            if value is None:
                value = default_svi_inducing(n) if name == "num_inducing" and method.streams else min(DEFAULT_BATCH, n)
            elif applies and value > n:
                raise InvalidParameterError(
                    f"Invalid value for {name}: {value} (must be between 1 and the number of training points N = {n})")
            sizes[name] = value
        kernel = default_kernel(method, n) if params.kernel is None else params.kernel
        moves = params.optimize_inducing
        return replace(params, kernel=kernel, **sizes,
                       optimize_inducing=default_optimize_inducing(method, n) if moves is None else moves)

    def _fit_threads_set(self, X: Any, y: Any, checkpoint: Any, resume: Any) -> "GPBSVM":
        if self._fit_multiclass(X, y, checkpoint=checkpoint, resume=resume):
            return self
        params = self._checked_params()
        params = replace(params, run_io=self._run_io(params.inference, checkpoint, resume))
        X, y = self._fit_input(X, y)
        params = self._resolved(params, X.shape[0])
        n, method = X.shape[0], params.method
        self.kernel_ = params.kernel
        classes = classes_together(self)
        available = available_memory()
        advice = memory_advice(method, n, available, classes=classes,
                               precision=None if self.precision is None else params.precision,
                               num_inducing=params.num_inducing, batch_size=params.batch_size)
        if method.dense_buffers is not None:
            check_dense_memory(
                n, params.precision, method.dense_buffers,
                what=f"GPBSVM(inference={method.name!r})", advice=advice, classes=classes, available=available,
            )
        else:
            m, batch = params.num_inducing, params.batch_size
            check_memory(
                classes * inducing_memory(method, n, m, batch, params.precision),
                what=f"GPBSVM(inference={method.name!r}) with M = {m} inducing points on N = {n} points"
                + (f" for {classes} one-vs-rest classes, fitted together" if classes > 1 else ""),
                sizes=[("num_inducing", m)]
                + ([("batch_size", batch)] if method.streams else [("the training points", n)]),
                available=available, advice=advice,
            )
        theta0 = _initial_kernel_params(params.kernel, self.kernel_params, X, params.precision)
        # past this point the kernel is an object, at its structure: compiled code depends on nothing else
        params = replace(params, kernel=as_kernel(params.kernel).structure())
        learn = _trainable(theta0, self.learn_kernel)
        x64 = params.precision == "float64"
        self._x64 = x64
        dtype = np.float64 if x64 else np.float32
        with float_precision(x64):
            theta0 = jax.tree.map(lambda a: jnp.asarray(a, dtype), theta0)
            if method.streams:  # the data stay on the host
                method.fit(self, X, y, theta0, learn, params)
                self._fit_link(X, y, params.calibrate)
                return self
            key = self._fit_key()
            Xj, yj = jnp.asarray(X, dtype), jnp.asarray(y, dtype)
            a0, b0 = params.gamma_prior or (2.0, 1.0)
            gamma0 = _gamma0_hyper(params.gamma0, params.gamma0_prior)
            hyper = GPHyper(*(jnp.asarray(v, dtype) for v in (params.gamma, a0, b0, *gamma0)))
            if method.dense_buffers is not None:
                self._check_kernel_matrix(Xj, theta0, params)
            posterior, stats, self._posterior = method.fit(self, key, Xj, yj, theta0, learn, hyper, params)
        self._store(posterior, stats, X, y, params)
        self._fit_link(X, y, params.calibrate)
        if method.samples:  # the others have no chains to judge
            self._check_mixing()
        return self

    def _fit_vi(self, key, X, y, theta0, learn, hyper, params):
        """B-BSVM (Wenzel et al. 2017, Sec. 4.1) at the initial kernel parameters."""
        K = prior_covariance(X, params.kernel, theta0, params.jitter)
        res = self._solve_resumable(params.run_io, batch_vi, K, y, hyper.gamma, tol=params.tol,
                                    max_iter=params.max_iter)
        elbo = np.asarray(res.lower_bound[: int(res.n_iter)], dtype=np.float64)
        if not np.all(np.isfinite(elbo)) or not np.all(np.isfinite(np.asarray(res.state.mu))):
            raise NonFiniteStateError(
                f"Batch VI produced a non-finite ELBO at kernel_params = {params_dict(theta0)}; check the data "
                f"scale and the kernel parameters{float64_hint(X.dtype)}."
            )
        self.elbo_ = elbo
        self.n_iter_ = int(res.n_iter)
        sw, LB = batch_vi_factor(K, res.state.alpha, hyper.gamma)
        self.alpha_ = np.asarray(_cho_solve(cholesky_or_raise(K)[0], res.state.mu), dtype=np.float64)
        posterior = {"f": np.asarray(res.state.mu, dtype=np.float64)[None, None]}
        return posterior, {"elbo": elbo[None, None, :]}, VIPosterior(X, theta0, sw, LB, self.alpha_, params.kernel)

    def _fit_svi(self, X, y, theta0, learn, params):
        """S-BSVM (Wenzel et al. 2017, Alg. 1) with ML-II every ``mlii_every`` steps (eq. 12)."""
        n = X.shape[0]
        n_kernel = sum(np.size(v) for k, v in field_values(theta0).items() if k in learn)
        num_steps = params.max_iter or default_svi_steps(n, params.batch_size, n_kernel)
        seed = self._fit_seed()
        Z0 = init_inducing(X, params.num_inducing, params.inducing, seed)
        if params.optimize_inducing:
            learn += ("inducing",)
        dtype = np.float64 if self._x64 else np.float32
        res, problem = self._solve(
            svi_gp, X, y, theta0, Z0, seed, kernel=params.kernel, learn=learn, num_steps=num_steps,
            batch_size=params.batch_size, step_size=self.step_size, hyper_every=params.mlii_every,
            learning_rate=params.learning_rate, gamma=params.gamma, jitter=params.jitter, dtype=dtype,
            devices=params.devices, progress=self.progress_bar and num_steps >= 100_000, **params.run_io,
        )
        state = res.state
        if not res.elbo.size:
            raise NonFiniteStateError(
                f"SVI produced a non-finite ELBO in its first {params.mlii_every} steps at kernel_params = "
                f"{params_dict(theta0)}; lower step_size, check the data scale{float64_hint(dtype)}."
            )
        self._posterior = SVIPosterior(state, prediction_problem(problem.features.spec, state))
        theta, Z, mean_u, cov_u = inducing_posterior(state, problem.features.spec)
        self.variational_mean_ = np.asarray(mean_u, dtype=np.float64)
        self.variational_cov_ = np.asarray(cov_u, dtype=np.float64)
        self.inducing_points_ = np.asarray(Z, dtype=np.float64)
        self.kernel_params_ = params_dict(theta)
        self.gamma_ = params.gamma
        self.elbo_, self.elbo_steps_ = res.elbo, res.steps
        self.n_iter_ = int(state.step)
        for attr in ("f_", "alpha_", "support_", "support_vectors_", "dual_coef_", "objective_", "log_z_"):
            if hasattr(self, attr):
                delattr(self, attr)
        posterior = {"u": gaussian_draws(seed, self.variational_mean_, cov=self.variational_cov_)}
        names = getattr(self, "feature_names_in_", None)
        self._defer_idata(
            posterior=posterior, sample_stats={"elbo": res.elbo[None, None, :]}, constant_data=_kernel_values(theta),
            approximation=params.method.approximation,
            coords={"inducing": np.arange(Z.shape[0]),
                    "feature": list(names) if names is not None else [f"x{j}" for j in range(X.shape[1])]},
            dims={"u": ["inducing"], "elbo": ["svi_round"], **_feature_dims(theta)},
            attrs={"model": "gp", "kernel": kernel_name(self.kernel_), "inference": params.inference,
                   "bayes_maxmargin_version": __version__},
        )

    def _check_kernel_matrix(self, X, theta, params) -> None:
        """Factorise K + jitter I once; raise a clear error if it stays singular."""
        if bool(_factorises(theta, X, params.kernel, params.jitter)):
            return
        K = prior_covariance(X, params.kernel, theta, params.jitter)
        try:
            cholesky_or_raise(K)
        except CholeskyError as err:
            raise ValueError(
                f"The {kernel_name(self.kernel_)!r} kernel matrix of the training inputs at kernel_params = "
                f"{params_dict(theta)} is not positive definite even after jitter ({err}); increase "
                f"jitter (now {params.jitter}) or check the kernel parameters{float64_hint(X.dtype)}."
            ) from None

    def _fit_ecm(self, key, X, y, theta0, learn, hyper, params):
        estimate_gamma = params.gamma_prior is not None
        exact = params.solver == "interior_point" and not estimate_gamma and params.gamma0 == 0.0
        tol = jnp.asarray(params.tol, X.dtype)
        res = self._solve_resumable(  # no kernel parameter to learn: gp_ecm_mlii's ECM run alone (mlii_steps=0)
            params.run_io, gp_ecm_mlii,
            X, y, theta0, hyper, tol, kernel=params.kernel, max_iter=params.max_iter,
            mlii_every=params.mlii_every, mlii_steps=params.mlii_steps if learn else 0,
            optimizer=params.optimizer, learning_rate=params.learning_rate,
            estimate_gamma=estimate_gamma, jitter=params.jitter, trainable=learn, mlii_tol=params.mlii_tol,
            accelerate=params.accelerate, exact=exact, criterion=params.mlii_criterion,
            theta_prior=_mlii_prior(theta0, learn, params),
        )
        objective, log_z, theta = res.objective, res.log_z, res.theta
        if not exact:
            self._check_converged(objective, params)
        alpha = _mode_alpha(theta, X, y, res.inv_lam, res.gamma, params.kernel, params.jitter)
        self.alpha_ = np.asarray(alpha, dtype=np.float64)
        mode = ModePosterior(X, y, res.inv_lam, res.gamma, theta, None, params.kernel, params.jitter)
        return (*self._point_estimate(res.f, res.gamma, theta, objective, log_z, estimate_gamma), mode)

    def _fit_fitc(self, key, X, y, theta0, learn, hyper, params):
        estimate_gamma = params.gamma_prior is not None
        seed = int(_key_seed(key))
        V0 = init_inducing(np.asarray(X), params.num_inducing, params.inducing, seed)
        learns = bool(learn) or params.optimize_inducing
        res = self._solve_resumable(
            params.run_io, gp_ecm_mlii,
            X, y, theta0, hyper, jnp.asarray(params.tol, X.dtype), V0=jnp.asarray(V0, X.dtype),
            kernel=params.kernel, max_iter=params.max_iter,
            mlii_every=params.mlii_every if learns else 0, mlii_steps=params.mlii_steps,
            optimizer=params.optimizer, learning_rate=params.learning_rate, estimate_gamma=estimate_gamma,
            optimize_inducing=bool(params.optimize_inducing), jitter=params.jitter, trainable=learn,
            mlii_tol=params.mlii_tol, accelerate=params.accelerate, criterion=params.mlii_criterion,
            theta_prior=_mlii_prior(theta0, learn, params),
        )
        self._check_converged(res.objective, params)
        self.inducing_points_ = np.asarray(res.V, dtype=np.float64)
        alpha = _fitc_alpha(res.theta, X, res.V, y, res.inv_lam, res.gamma, params.kernel, params.jitter)
        self.alpha_ = np.asarray(alpha, dtype=np.float64)
        mode = ModePosterior(X, y, res.inv_lam, res.gamma, res.theta, res.V, params.kernel, params.jitter)
        return (*self._point_estimate(res.f, res.gamma, res.theta, res.objective, res.log_z, estimate_gamma), mode)

    def _check_converged(self, objective, params) -> None:
        """ConvergenceWarning where the final ECM run took its whole ``max_iter`` budget and its last
        iteration still changed the objective by more than ``tol`` (relative, as :func:`gp_ecm` stops)."""
        runs = [row[np.isfinite(row)] for row in np.atleast_2d(np.asarray(objective, dtype=np.float64))]
        last = next((row for row in reversed(runs) if row.size), np.zeros(0))
        if last.size < 2 or last.size - 1 < ecm_runs(params.max_iter, params.accelerate):
            return
        change = abs(last[-1] - last[-2]) / max(abs(last[-1]), 1.0)
        if change > params.tol:
            hint = (" (a FITC prior with nearly as many inducing points as rows can be too ill-conditioned to "
                    "reach tol: raise jitter)") if params.method.inducing_matrices else ""
            warnings.warn(
                f"GPBSVM(inference={self._inference()!r}) stopped at max_iter={params.max_iter} with a relative "
                f"change of the objective of {change:.2g} in its last iteration, above tol={params.tol:g}: "
                f"raise max_iter{hint}.", ConvergenceWarning, stacklevel=4)

    def _point_estimate(self, f, gamma, theta, objective, log_z, estimate_gamma):
        objective = np.asarray(objective, dtype=np.float64)
        finite = objective[np.isfinite(objective)]
        if not np.all(np.isfinite(np.asarray(f))) or finite.size < np.count_nonzero(~np.isnan(objective)):
            raise NonFiniteStateError(
                f"ECM produced a non-finite latent function or objective at kernel_params = "
                f"{params_dict(theta)}, gamma = {float(gamma):.4g}; check the data scale, the kernel "
                f"parameters and the jitter{float64_hint(np.asarray(f).dtype)}."
            )
        self.objective_ = finite
        log_z = np.asarray(log_z, dtype=np.float64)
        self.log_z_ = log_z[~np.isnan(log_z).all(axis=1)]  # the ML-II rounds run (all, without mlii_tol)
        runs = np.count_nonzero(~np.isnan(objective).all(axis=-1))
        self.n_iter_ = int(finite.size - runs)  # one start value per ECM run
        posterior = {"f": np.asarray(f, dtype=np.float64)[None, None]}
        if estimate_gamma:
            posterior["gamma"] = np.asarray(gamma, dtype=np.float64)[None, None]
        stats = {"log_joint": finite[None, None, -1:].reshape(1, 1), "objective": finite[None, None, :]}
        return posterior, stats

    def _fit_gibbs(self, key, X, y, theta0, learn, hyper, params):
        sample_gamma = params.gamma_prior is not None
        sample_gamma0 = params.gamma0_prior is not None
        k_run, f0 = _chain_starts(key, params.num_chains, (X.shape[0],), X.dtype, 0.1)
        if not learn:  # theta fixed: eq. (7) at theta0
            data = gp_data(prior_covariance(X, params.kernel, theta0, params.jitter), y)
            state = init_chains(init_gp, (0, None, None), f0, data, hyper, sample_gamma=sample_gamma,
                                sample_gamma0=sample_gamma0)
            kernel, record = build_gp_kernel(sample_gamma, sample_gamma0, params.elliptical_steps), record_gp
        else:  # theta sampled too (slice steps on log theta given lambda, gamma)
            data = gp_theta_data(X, y, _kernel_prior(theta0, params.kernel_prior_scale, learn), params.jitter,
                                 adapt_steps=params.num_warmup)  # slice widths adapt during the warm-up
            state = init_chains(init_gp_theta, (0, None, None, None), f0, theta0, data, hyper, kernel=params.kernel,
                                sample_gamma=sample_gamma, sample_gamma0=sample_gamma0)
            kernel = build_gp_theta_kernel(params.kernel, theta0, sample_gamma, sample_gamma0,
                                           params.theta_sampler, params.elliptical_steps)
            record = build_gp_theta_record(theta0, learn)
        result = self._solve(
            run_chains, kernel, record, state, k_run, data, hyper,
            num_warmup=params.num_warmup, num_samples=params.num_samples, thin=params.thin,
            progress_bar=self.progress_bar, **params.run_io,
        )
        self.n_iter_ = result.num_iterations
        s = result.samples
        if not sample_gamma0:
            s = {k: v for k, v in s.items() if k != "gamma0"}
        return self._draws(X, s, sample_gamma, theta0, {"log_joint": s["log_joint"], **result.info}, params)

    def _fit_nuts(self, key, X, y, theta0, learn, hyper, params):
        sample_theta = bool(learn)
        prior = _kernel_prior(theta0, params.kernel_prior_scale, learn) if sample_theta else None
        samples, stats = self._nuts(
            gp_bsvm, key, (X, y),
            {"kernel": params.kernel, "kernel_params": theta0, "gamma": params.gamma,
             "gamma_prior": params.gamma_prior, "gamma0": params.gamma0, "jitter": params.jitter,
             "kernel_prior": prior, "noncentered": sample_theta},
            num_warmup=params.num_warmup, num_samples=params.num_samples, num_chains=params.num_chains,
            thin=params.thin, run_io=params.run_io,
        )
        self.n_iter_ = params.num_warmup + params.num_samples * params.thin
        return self._draws(X, samples, "gamma" in samples, theta0, stats, params)

    def _draws(self, X, samples, sample_gamma, theta, stats, params):
        """Posterior draws for idata_, and what prediction needs: the draws of f and, when theta
        was sampled, its draws (at most ``_PREDICT_THETA_DRAWS`` of them, evenly spaced)."""
        f = np.asarray(samples["f"], dtype=np.float64)
        f_draws = f.reshape(-1, f.shape[-1])
        posterior = {"f": f}
        if sample_gamma:
            posterior["gamma"] = np.asarray(samples["gamma"], dtype=np.float64)
        if "gamma0" in samples:
            posterior["gamma0"] = np.asarray(samples["gamma0"], dtype=np.float64)
        sampled = [name for name in free_fields(theta) if name in samples]
        theta_draws = None
        if sampled:
            draws = {k: np.asarray(samples[k], dtype=np.float64) for k in sampled}
            posterior.update(draws)
            keep = np.unique(np.linspace(0, f_draws.shape[0] - 1, _PREDICT_THETA_DRAWS).astype(int))
            f_draws = f_draws[keep]
            fixed = field_values(theta)  # the fields not sampled repeat their value in every draw
            theta_draws = replace_fields(theta, {
                k: draws[k].reshape((-1,) + draws[k].shape[2:])[keep] if k in draws
                else np.broadcast_to(np.asarray(fixed[k]), (keep.size, *np.shape(fixed[k]))) for k in free_fields(theta)})
            theta = replace_fields(theta, {k: v.reshape((-1,) + v.shape[2:]).mean(axis=0) for k, v in draws.items()})
        return posterior, stats, DrawsPosterior(X, f_draws, theta, theta_draws, params.kernel, params.jitter)

    def _store(self, posterior, stats, X, y, params) -> None:
        f = posterior["f"]
        theta = self._posterior.theta
        self.f_ = f.reshape(-1, f.shape[-1]).mean(axis=0)
        self.gamma_ = float(posterior["gamma"].mean()) if "gamma" in posterior else params.gamma
        self.kernel_params_ = params_dict(theta)  # the posterior mean when theta is sampled
        if params.method.samples:
            with float_precision(self._x64):
                K = prior_covariance(jnp.asarray(X), params.kernel, theta, params.jitter)
                chol, _ = cholesky_or_raise(K)
                self.alpha_ = np.asarray(_cho_solve(chol, jnp.asarray(self.f_, K.dtype)), dtype=np.float64)
        self.support_ = support_vectors(self.f_, y)
        self.support_vectors_ = X[self.support_]
        self.dual_coef_ = self.alpha_[self.support_][None, :]
        approximation, constant, latent_draws_at = params.method.approximation, None, None
        gamma_draws, gamma0_draws = posterior.get("gamma"), posterior.get("gamma0")
        needs_log_lik = params.gamma0 > 0 or gamma0_draws is not None
        if approximation is not None:  # ECM, FITC, VI: draws of f; gamma and theta are points
            if needs_log_lik:  # the pointwise log likelihood needs the draws now
                posterior = {"f": self._latent_draws(X)}
            else:  # drawn when idata_ is built (:meth:`_idata_from`)
                posterior, latent_draws_at = {}, X
            constant = _kernel_values(theta)
            if gamma_draws is not None:
                constant["gamma"] = np.float64(self.gamma_)
                gamma_draws = np.full(APPROXIMATION_DRAWS, self.gamma_)
        log_lik = None
        if needs_log_lik:
            log_lik = {"y": _pointwise_log_lik(posterior["f"], gamma_draws, y, params.gamma, params.gamma0, gamma0_draws)}
        d = self.n_features_in_
        names = getattr(self, "feature_names_in_", None)
        features = list(names) if names is not None else [f"x{j}" for j in range(d)]
        self._defer_idata(  # built when first read: a refit of calibrate="cv" never reads it
            posterior=posterior,
            sample_stats=stats,
            observed_data={"y": y},
            log_likelihood=log_lik,
            constant_data=constant,
            coords={"obs": np.arange(y.shape[0]), "feature": features},
            dims={"f": ["obs"], "y": ["obs"], "objective": ["ecm_iteration"], **_feature_dims(theta)},
            attrs={"model": "gp", "kernel": kernel_name(self.kernel_), "inference": params.inference,
                   "bayes_maxmargin_version": __version__},
            approximation=approximation,
            latent_draws_at=latent_draws_at,
        )

    def _latent_draws(self, X: np.ndarray) -> np.ndarray:
        """Independent draws of f at ``X`` from the marginals of a deterministic fit's Gaussian posterior
        (shape (chain, draw, n): :data:`~bayes_maxmargin.diagnostics.APPROXIMATION_DRAWS`), from its seed."""
        mean, var = self._latent_moments(X)
        return gaussian_draws(self._fit_seed(), mean, sd=np.sqrt(np.maximum(var, 0.0)))

    def _idata_from(self, parts: dict[str, Any]) -> Any:
        """As the base class, with the draws of f of a deterministic fit (its ``latent_draws_at``: the
        training inputs) drawn now, so that a fit whose ``idata_`` is never read (a refit of
        ``calibrate="cv"``) never computes its posterior moments at every training row."""
        X = parts.pop("latent_draws_at", None)
        if X is not None:
            parts["posterior"] = {"f": self._latent_draws(X), **parts["posterior"]}
        return super()._idata_from(parts)

    def _fit_link(self, X: np.ndarray, y: np.ndarray, calibrate: bool | str) -> None:
        """``link_``: (a, b) fitted to the leave-one-out moments of f at the training inputs (at most
        :data:`LINK_ROWS` of them: a subset of whole groups of repeated rows drawn from the fit's seed,
        :func:`~bayes_maxmargin.core.predict.link_rows`, whose moments alone are computed and whose labels
        the link is fitted to), or (1, 0) where ``calibrate`` (:attr:`GPSettings.calibrate`) is False or "cv".

        Rows that repeat an input are left out with all their twins
        (:func:`~bayes_maxmargin.core.predict.tie_groups`). Where that moves the link by more than its
        sampling error (:func:`~bayes_maxmargin.core.predict.link_shift`), the twins informed each other in
        the kernel parameters and the posterior as well, which were fitted to every copy, and no held-out
        moments are left to learn from: a warning, and the identity link."""
        self.link_ = np.array([1.0, 0.0])
        self.__dict__.pop("link_input_", None)  # a link on f (a refit's, after one on the margin)
        if calibrate in (False, "cv"):  # "cv": :meth:`_cross_fit_link`, once the fit is done
            return
        rows = link_rows(X, LINK_ROWS, self._fit_seed())
        if rows is not None:
            X, y = X[rows], y[rows]
        groups = tie_groups(X)
        dtype = jnp.float64 if self._x64 else jnp.float32
        with float_precision(self._x64):
            moments = self._posterior.loo_latent(X, y, self.gamma_, dtype, groups=groups, rows=rows)
            kept = None if groups is None else self._posterior.loo_latent(X, y, self.gamma_, dtype, rows=rows)
        link = fit_probit_link(*moments, y)
        if kept is not None:
            with_twins = fit_probit_link(*kept, y)
            shift = link_shift(*moments, y, link, with_twins)
            if shift > LINK_SHIFT_LIMIT:
                ties = X.shape[0] - np.unique(groups).size
                warnings.warn(
                    f"GPBSVM(calibrate=True): {ties} of the {X.shape[0]} training rows repeat the input of another "
                    f"row, and leaving their twins out moves the learnt link from a = {with_twins[0]:.3g}, b = "
                    f"{with_twins[1]:.3g} to a = {link[0]:.3g}, b = {link[1]:.3g} ({shift:.3g} squared standard "
                    f"errors, above {LINK_SHIFT_LIMIT:.3g}): the kernel parameters and the posterior were fitted to "
                    "every copy, so no held-out moments are left to learn the link from, and link_ is the identity "
                    "(Phi(f)). Remove the repeated rows to learn it.", UserWarning, stacklevel=4)
                return
        self.link_ = link

    def _cross_fit_folds(self, X: np.ndarray, y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """The folds of ``calibrate="cv"`` (:func:`~bayes_maxmargin.data.splits.cross_fit_folds` with the
        fit's seed, repeated inputs held out together); an InvalidParameterError names a class too small, or
        where the default chose them (``calibrate=None``), a warning, and None: the leave-one-out links."""
        try:
            return cross_fit_folds(y, tie_groups(X), CV_FOLDS, self._fit_seed())
        except ValueError as err:
            if _is_cv(self.calibrate):
                raise InvalidParameterError(f"GPBSVM(calibrate='cv'): {err}") from None
            warnings.warn(f"GPBSVM(): {err}, so the link is learnt from leave-one-out moments (calibrate=True) "
                          "instead of from refits", UserWarning, stacklevel=3)
            return None

    def _cross_fit_link(self, X: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """``link_`` of ``calibrate="cv"``, on the margin (``link_input_``), for each binary problem (a
        one-vs-rest fit's binary estimators get theirs): Platt scaling with the probit,
        :func:`~bayes_maxmargin.core.predict.fit_probit_link` of its labels (+1 for the class, -1 for the
        rest; binary: ``classes_[1]``) given the probit margins m / sqrt(1 + v) of f at the held-out rows of
        :data:`CV_FOLDS` refits on the rows of :func:`~bayes_maxmargin.data.splits.cross_fit_folds`
        (:meth:`_fold_settings`)."""
        problems = self._binary_problems()
        for est, label in problems:
            labels = np.where(y == label, 1.0, -1.0)
            margin = np.zeros(len(y))
            for train, held in folds:
                with warnings.catch_warnings():  # the refits are thrown away: their chains are not the user's
                    warnings.simplefilter("ignore", MixingWarning)
                    warnings.simplefilter("ignore", SeparableClassesWarning)
                    fold = clone(est).set_params(**est._fold_settings()).fit(X[train], labels[train])
                margin[held] = probit_margin(*fold.predict_latent(X[held]))
            est.link_, est.link_input_ = fit_probit_link(margin, np.zeros(len(y)), labels), "margin"
        if self._multiclass:
            self.link_, self.link_input_ = np.stack([est.link_ for est, _ in problems]), "margin"

    def _binary_problems(self) -> list[tuple["GPBSVM", Any]]:
        """(binary fit, its +1 label) of each problem: the one-vs-rest ``estimators_`` with their classes, or
        this fit with ``classes_[1]``."""
        return list(zip(self.estimators_, self.classes_)) if self._multiclass else [(self, self.classes_[1])]

    def _leave_one_out_links(self, X: np.ndarray, y: np.ndarray) -> None:
        """Each binary problem's link from its leave-one-out moments (:meth:`_fit_link` with
        ``calibrate=True``): the default's link where the folds of ``calibrate="cv"`` cannot be formed."""
        problems = self._binary_problems()
        for est, label in problems:
            est._fit_link(X, np.where(y == label, 1.0, -1.0), True)
        if self._multiclass:
            self.link_ = np.stack([est.link_ for est, _ in problems])
            self.__dict__.pop("link_input_", None)

    def _fold_settings(self) -> dict[str, Any]:
        """The settings of this binary fit's refits for ``calibrate="cv"``: no link, no progress, the fitted
        kernel, and where ML-II chose the kernel parameters (ECM, FITC, svi) those parameters held fixed, so
        that each refit fits f afresh on its rows without ML-II (on the first five splits of ionosphere,
        flare_solar and sonar the same test Brier score to 0.001 as refits with ML-II, in a third to half of
        their time); the samplers' refits sample theta as the fit did."""
        settings = {"calibrate": False, "progress_bar": False, "inference": self._inference(),
                    "kernel": self.kernel_ if isinstance(self.kernel_, (str, Kernel)) else self.kernel}
        if self._method().mlii:
            settings.update(learn_kernel=False, kernel_params=self.kernel_params_)
        return settings

    def _linked(self, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Moments of the probit's argument under ``link_`` on ``link_input_`` (fits saved without them: the
        identity, and a link on f)."""
        return linked_moments(mean, var, vars(self).get("link_"), vars(self).get("link_input_", "f"))

    def _saved_state(self) -> dict[str, Any]:
        state = super()._saved_state()
        post = state.get("_posterior")
        if isinstance(post, SVIPosterior):  # saved as (state, kernel parameters): the compiled problem is
            del state["_posterior"]  # rebuilt on load, and the optimiser states are not needed
            state["_svi"] = (post.state._replace(nat_opt=None, hyper_opt=None), post.problem.features.spec.like)
        return state

    #: What every binary fit sets (:meth:`_check_restored`).
    _FITTED = ("_posterior", "gamma_", "kernel_", "kernel_params_")

    def _check_restored(self) -> None:
        """As the base class; and a binary fit's posterior agrees with its fitted attributes
        (:func:`~bayes_maxmargin.models.gp.consistency.check_gp_fit`)."""
        super()._check_restored()
        chosen = vars(self).get("inference_", self.inference)  # files before inference_: inference itself
        if self._METHODS.lookup(chosen) is None or self.inference not in (None, chosen):
            raise ValueError(f"inference_ is {chosen!r}, not an inference method the fit's inference="
                             f"{self.inference!r} stands for")
        if not self._multiclass:
            params = self._checked_params()
            check_gp_fit(self.__dict__, self.n_features_in_, params.gamma0, params.jitter)

    def _restore_saved(self, state: dict[str, Any]) -> None:
        if "kernel_" not in state:  # written before kernel_, when kernel was never None
            state = {**state, "kernel_": self.kernel}
        if {"_point", "_svi", "_f_draws"} & set(state):  # SVI fits, and fits written before the typed posteriors
            state = _posterior_from_point(state, self)
        super()._restore_saved(state)

    # ------------------------------------------------------------------ prediction
    def _latent_moments(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with float_precision(self._x64), limit_blas_threads(getattr(self._method(), "blas_threads", None)):
            mean, var = self._posterior.latent_moments(X, jnp.float64 if self._x64 else jnp.float32)
        return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)


# ============================================================================ the inference methods
#: The inference methods of :class:`GPBSVM`, each with its fit step and capabilities (:class:`GPMethod`).
#:
#: - gamma0: the paper's 0.1 for the samplers, the exact hinge (0, so that alpha is sparse) for the others.
#: - num_samples: Gibbs with theta sampled reaches 0.14-0.22 effective draws per draw of theta and f (two half
#:   moons, 200 rows; iris, classes 1 and 2 against the rest), and the check R-hat <= 1.01 over the N values of
#:   f needs about 1000 effective draws of each (with 1000 draws per chain the largest of 200 R-hats passed
#:   1.01 in most fits by chance alone); NUTS keeps its 1000.
#: - blas_threads: ECM and FITC factorise an N x N (or M x M) matrix in every iteration and every ML-II
#:   evaluation, each a LAPACK call of its own, which OpenBLAS's threads slow down (badly on shared cores,
#:   :func:`~bayes_maxmargin.core.linalg.limit_blas_threads`); svi's run limits its own, and its steps around
#:   the run (the median distance, k-means, the factors of q(u)) are small products and solves. Gibbs
#:   factorises N x N matrices in every sweep (about a dozen with the kernel sampled): on 150 x 30 rows, one
#:   chain, 2 shared cores, one thread ran 90 sweeps per second against 0.8 with OpenBLAS's two.
#: - dense_buffers (the kernel matrix, its Cholesky factor and the working matrices of an iteration and of
#:   its gradient): the peak resident memory of fits at N = 2000 (learned kernel parameters; Gibbs with two
#:   chains) over N^2 * 8 bytes, rounded up (ECM 12.2, VI 13.0, Gibbs 17.8); NUTS, not measured, as Gibbs. A
#:   one-vs-rest fit of K classes runs them in one program holding K times as many (ECM, 3 and 6 classes,
#:   N = 750 and 1500: 13.2 and 12.9 per class from the growth of the peak with N^2).
#: - inducing_matrices: N x M and M x M (FITC), and for svi M x M, minibatch x M and link-rows x M
#:   (``min(N, LINK_ROWS)`` rows, those the link is learnt on). Least-squares fits to the peak resident memory
#:   of float64 fits over the process's memory before them, rounded up: FITC at N, M = 3000 / 1500,
#:   3000 / 750, 1500 / 750, 1500 / 1500 gives 17.9 N x M and 21.3 M x M (the four peaks within 3 MB) plus
#:   438 MB that do not grow with N or M (the compiler's); svi at N, M, ``|S|`` = 3000 / 1500 / 100,
#:   3000 / 750 / 100, 3000 / 1500 / 400, 1500 / 750 / 100, 1500 / 1500 / 100, 3000 / 3000 / 100 gives
#:   24.5 M x M, 30.1 ``|S|`` x M and 4.3 N x M plus 269 MB (the peaks within 53 MB), rounded up to cover every
#:   peak (27, 31, 5).
#: - precision: float32 for svi. Measured with ``benchmarks/vs_peers.py`` (5 splits, all nine sets): second
#:   fits 1.4-1.8 times shorter than in float64, the same test error, Brier score and log loss to 3e-4; on
#:   200 000 SUSY-like rows the same final error (0.208). Its natural-gradient steps keep q(u)'s precision a
#:   convex combination of positive-definite matrices, and each Cholesky factor adds jitter when float32
#:   needs it.
#: - mlii_every: svi steps between ML-II steps; ECM / FITC iterations otherwise (Henao et al.: 20).
#: - mlii_tol: ECM stops its ML-II iterations and rounds once they gain at most 1e-4 (relative); FITC runs
#:   them all. Measured (``vs_peers`` splits, second fits): against 1e-5, on heart, breast cancer, flare-solar,
#:   diabetis and german (5 splits) the same test error and Brier score to 0.003 in 10-20 % less time, on two
#:   half moons of 1400 training rows (2 splits) 4 ML-II rounds instead of 7.5 and 10.8 s instead of 15.8 s
#:   (error 0.104 against 0.103); against None (the paper's schedule), 3-10 times faster on 500-1000 rows.
#:   FITC, already fast, loses 0.3-0.7 points of test error on german, waveform and splice when it stops
#:   early.
#: - criteria: "loo" first for ECM, "evidence" (eq. 9 / 10) for FITC. Measured with
#:   ``benchmarks/vs_peers.py``'s splits (5 each): ECM's Brier score with "loo" against "evidence" is lower
#:   or the same on 14 of 17 sets (diabetis 0.158 against 0.198, flare_solar 0.236 against 0.301,
#:   breast_cancer 0.185 against 0.204, heart 0.139 against 0.149; GPC 0.154, 0.220, 0.206, 0.133), higher
#:   on crabs (0.008 against 0.002); its test error higher by up to 0.01 on the clean sets (wdbc,
#:   ionosphere, crabs, wisconsin, sonar). Its ML-II steps cost 2-3 times those of eq. (9) (the diagonal of
#:   an inverse, and its gradient). FITC, whose few inducing points already smooth, keeps eq. (10): "loo"
#:   raised its test error on diabetis from 0.234 to 0.254 and on breast_cancer from 0.241 to 0.283
#:   (3 splits).
#: - ard_from, optimize_inducing_from: :data:`ARD_MIN_ROWS` for svi; FITC always moves its points.
GP_METHODS: Registry[GPMethod] = Registry(
    GPMethod(name="ecm", fit=GPBSVM._fit_ecm, checkpoints=True, mode=True, blas_threads=1, dense_buffers=13,
             mlii=True, criteria=("loo", "evidence"), mlii_tol=1e-4, posterior=ModePosterior,
             approximation="the marginals of the Gaussian conditional of f at the ECM mode given E[1/lambda] "
                           "(eq. 11-12)"),
    GPMethod(name="fitc", fit=GPBSVM._fit_fitc, checkpoints=True, mode=True, blas_threads=1,
             inducing_matrices={"nm": 18, "mm": 22}, mlii=True, criteria=("evidence", "loo"),
             posterior=ModePosterior, optimize_inducing_from=0,
             approximation="the marginals of the Gaussian conditional of f at the FITC mode given E[1/lambda] "
                           "(eq. 10-12)"),
    GPMethod(name="gibbs", fit=GPBSVM._fit_gibbs, samples=True, checkpoints=True, gamma0=0.1, samples_gamma0=True,
             blas_threads=1, dense_buffers=18, num_samples=2000),
    GPMethod(name="nuts", fit=GPBSVM._fit_nuts, samples=True, checkpoints=True, gamma0=0.1, dense_buffers=18),
    GPMethod(name="vi", fit=GPBSVM._fit_vi, checkpoints=True, dense_buffers=14, posterior=VIPosterior,
             hinge_only=True, approximation="the marginals of q(f) of batch VI"),
    GPMethod(name="svi", fit=GPBSVM._fit_svi, checkpoints=True, blas_threads=1,
             inducing_matrices={"mm": 27, "bm": 31, "lm": 5}, streams=True, precision="float32", mlii=True,
             mlii_every=5, posterior=SVIPosterior, max_iter=None, hinge_only=True, ard_from=ARD_MIN_ROWS,
             optimize_inducing_from=ARD_MIN_ROWS, approximation="q(u) of SVI"),
)
GPBSVM._METHODS = GP_METHODS


def _posterior_from_point(state: dict[str, Any], est: GPBSVM) -> dict[str, Any]:
    """The typed posterior of a saved SVI fit (its ``_svi`` tuple of state and kernel parameters, from
    which the compiled problem is rebuilt), or of a fit saved before there were typed posteriors (its
    ``_point`` dict or ``_f_draws`` / ``_theta_draws``, with ``_X_fit``, ``_y_fit`` and ``_theta``)."""
    state = dict(state)
    X, y = state.pop("_X_fit", None), state.pop("_y_fit", None)
    point, theta = state.pop("_point", None), state.pop("_theta", None)
    f_draws, theta_draws = state.pop("_f_draws", None), state.pop("_theta_draws", None)
    svi = state.pop("_svi", None)
    kernel = state["kernel_"]
    if svi is not None:
        svi_state, like = svi
        with float_precision(state["_x64"]):
            problem = prediction_problem(GPSpec(get_kernel(kernel), like, float(est.jitter)), svi_state)
        post = SVIPosterior(svi_state, problem)
    elif point is not None and "LB" in point:
        post = VIPosterior(X, point["theta"], point["sw"], point["LB"], state["alpha_"], kernel)
    elif point is not None:
        post = ModePosterior(X, y, point["inv_lam"], point["gamma"], point["theta"], point.get("V"), kernel,
                             est.jitter)
    else:
        post = DrawsPosterior(X, f_draws, theta, theta_draws, kernel, est.jitter)
    state["_posterior"] = post
    return state
