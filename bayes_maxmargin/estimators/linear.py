"""``LinearBSVM``: the linear Bayesian SVM (Polson & Scott 2011; Henao et al. 2014) and the extended
models of Luts & Ormerod (2014) as a scikit-learn classifier."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bayes_maxmargin._version import __version__
from bayes_maxmargin.core.augmentation import use_wide_form
from bayes_maxmargin.core.compilation import bucket_rows
from bayes_maxmargin.core.consistency import check_mean_of_draws
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.core.predict import probit_margin
from bayes_maxmargin.core.checks import InvalidParameterError, check_option, check_scalar_param
from bayes_maxmargin.data.validation import check_finite_output
from bayes_maxmargin.diagnostics import APPROXIMATION_DRAWS, to_inference_data
from bayes_maxmargin.engine.natural_gradient import moments as natural_moments
from bayes_maxmargin.engine.checkpoint import checkpoint_folder
from bayes_maxmargin.engine.mcmc import NonFiniteStateError, float64_hint, init_chains, run_chains
from bayes_maxmargin.estimators.base import (
    _BayesianSVMClassifier,
    _chain_normals,
    _chain_starts,
    _check_gamma0_prior,
    _check_gamma_prior,
    _gamma0_hyper,
    _pointwise_log_lik,
    reports_progress,
)
from bayes_maxmargin.estimators.registry import Method, Registry, Settings
from bayes_maxmargin.models.linear.em import linear_em, linear_map
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear, record_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, linear_bsvm, padded_data, prior_precision
from bayes_maxmargin.models.linear.posterior import (
    CovariancePosterior,
    DrawsPosterior,
    LowRankPosterior,
    PrecisionPosterior,
)
from bayes_maxmargin.models.linear.row_space import margin_basis, margin_bsvm, row_space
from bayes_maxmargin.models.linear.svi import svi_linear
from bayes_maxmargin.models.luts.gibbs import (
    build_laplace_zero_kernel,
    build_missing_kernel,
    build_mixed_kernel,
    init_laplace_zero,
    init_missing,
    init_mixed,
    record_laplace_zero,
    record_missing,
    record_mixed,
)
from bayes_maxmargin.models.luts.model import (
    ImputationHyper,
    LutsHyper,
    MissingData,
    MixedData,
    conditional_fill,
)
from bayes_maxmargin.models.luts.posterior import laplace_zero_posterior, missing_posterior, q_posterior, reordered
from bayes_maxmargin.models.luts.vb import vb_gaussian, vb_laplace_zero, vb_missing, vb_penalty

__all__ = ["LINEAR_METHODS", "LinearBSVM", "LinearFit", "LinearMethod", "LinearSettings", "LutsFit"]


@dataclass(frozen=True, kw_only=True)
class LinearMethod(Method):
    """An inference method of :class:`LinearBSVM` (:data:`LINEAR_METHODS`): the :class:`Method` fields, and

    Attributes
    ----------
    conjugate : bool
        Whether its chains draw from the conjugate conditionals of the augmented program (Gibbs: beta and the
        intercept jointly), rather than the intercept apart from beta (NUTS on the marginal program).
    luts : bool
        Whether it fits the models of Luts & Ormerod (2014): ``prior="penalty"`` / ``"laplace_zero"``,
        ``missing="model"`` and ``groups``.
    luts_only : bool
        Whether it fits those models only (the plain Gaussian prior as their Algorithm 1).
    streams : bool
        Whether it streams minibatches from the host (svi).
    """

    conjugate: bool = False
    luts: bool = False
    luts_only: bool = False
    streams: bool = False


@dataclass(frozen=True, kw_only=True)
class LinearSettings(Settings):
    """The parameters of a :class:`LinearBSVM` fit (:class:`~bayes_maxmargin.estimators.registry.Settings`
    and LinearBSVM's own), checked once (:meth:`LinearBSVM._checked_params`); ``wide`` is whether EM and
    Gibbs work in the row space of the design (p >= n, set by the fit)."""

    method: LinearMethod
    prior: str
    missing: str
    sigma: float
    intercept_scale: float | None
    rho: float
    A_u: float
    B_u: float
    overrelaxation: float
    marginal_moves: bool
    max_iter: int
    batch_size: int
    wide: bool = False


class LinearFit(NamedTuple):
    """What a fit step of :class:`LinearBSVM` returns (EM, Gibbs, NUTS, SVI).

    Attributes
    ----------
    coef : ndarray, shape (chain, draw, p)
        Draws of the coefficients [beta, intercept]; EM and SVI: the mode or the mean, as one draw.
    gamma : ndarray or None
        Draws of gamma (EM: its estimate); None where gamma is fixed.
    stats : dict
        ``idata_``'s sample statistics.
    gaussian : PrecisionPosterior, LowRankPosterior or None
        EM and SVI: the Gaussian posterior of the coefficients; None where the draws are the posterior.
    gamma0 : ndarray or None
        Draws of gamma0 (Gibbs with ``gamma0_prior``).
    wide : bool
        Whether the fit ran in the row space of the design (p >= n), which the mixing check then judges.
    """

    coef: np.ndarray
    gamma: np.ndarray | None
    stats: dict[str, Any]
    gaussian: Any = None
    gamma0: np.ndarray | None = None
    wide: bool = False


class Imputation(NamedTuple):
    """The missing covariates of a ``missing="model"`` fit (Luts & Ormerod 2014, Sec. 3.3).

    Attributes
    ----------
    X : ndarray, shape (n, d)
        The training inputs with each missing entry at its posterior mean.
    mean, cov : ndarray
        The imputation model's mean (d,) and covariance (d, d): posterior means (Gibbs) or their
        expectations under q (VB).
    """

    X: np.ndarray
    mean: np.ndarray
    cov: np.ndarray


class LutsFit(NamedTuple):
    """What a fit step of Luts & Ormerod's models returns, over the coefficients [beta, b, u] (features,
    intercept, group effects).

    Attributes
    ----------
    posterior : CovariancePosterior or LowRankPosterior or None
        VB: q of the coefficients; None for Gibbs, whose draws are the posterior.
    vb : VBResult or None
        VB: the solver's result (iterations, lower bound).
    draws : ndarray, shape (chain, draw, p), or None
        Gibbs: the coefficients' draws.
    stats : dict
        Gibbs: ``idata_``'s sample statistics (log joint, the kernels' Info).
    num_iterations : int
        Gibbs: the iterations run.
    sigma_u2 : ndarray, float or None
        Draws of sigma_u^2 (Gibbs) or its expectation under q (VB); None for Algorithm 1.
    inclusion : ndarray or None
        The Laplace-zero prior's inclusion: q's probabilities (VB), the indicators' draws (Gibbs).
    imputation : Imputation or None
        ``missing="model"``: the imputed covariates and the imputation model.
    wide : bool
        Whether the fit ran in the n-dimensional form (more coefficients than points).
    """

    posterior: Any = None
    vb: Any = None
    draws: np.ndarray | None = None
    stats: dict[str, Any] | None = None
    num_iterations: int = 0
    sigma_u2: Any = None
    inclusion: np.ndarray | None = None
    imputation: Imputation | None = None
    wide: bool = False


class LinearBSVM(_BayesianSVMClassifier):
    """Linear Bayesian SVM (Polson & Scott 2011; skewed Laplace of Henao et al. 2014, eq. 4-6).

    f(x) = x' beta + b with beta ~ N(0, sigma^2 I), b ~ N(0, intercept_scale^2) (flat if None), and
    the hinge pseudo-likelihood exp(-2 gamma max(1 - y f, 0)) (``gamma0 = 0``) or the skewed
    Laplace (``gamma0 > 0``). The EM solution with a flat intercept prior is the SVM with
    C = 2 gamma sigma^2.

    Luts & Ormerod (2014) extensions (``prior``, ``groups=``, ``missing="model"``) use their
    hinge with unit scale (``gamma = 1``, ``gamma0 = 0``) and are fitted by their mean-field VB
    (Algorithms 1-4, ``inference="vb"``) or their Gibbs samplers (Appendices A-C,
    ``inference="gibbs"``):

    * ``prior="gaussian"`` (default): beta ~ N(0, sigma^2 I) as above; with ``inference="vb"``
      Algorithm 1; with ``fit(X, y, groups=g)`` a random intercept per group, u_g ~ N(0, sigma_u^2),
      sigma_u^2 ~ IG(A_u, B_u) (Sec. 3.1, Example 2; Algorithm 2 / Appendix A);
    * ``prior="penalty"``: beta ~ N(0, sigma_u^2 I) with sigma_u^2 ~ IG(A_u, B_u), i.e. the SVM
      penalty alpha = 1 / (4 sigma_u^2) inferred (Sec. 3.1, Example 1; Algorithm 2 / Appendix A);
      with ``missing="model"`` NaN entries of X are imputed under d_i ~ N(mu, Sigma) (Sec. 3.3;
      Algorithm 4 / Appendix C);
    * ``prior="laplace_zero"``: beta_k = gamma_k v_k, v_k ~ Laplace(0, sigma_u), gamma_k ~
      Bernoulli(rho) (Sec. 3.2; Algorithm 3 / Appendix B); ``inclusion_probabilities_`` after fit.

    The intercept of these models has prior N(0, intercept_scale^2) (1e8 when None, the paper's
    sigma_beta^2).

    Multi-class: a y of K > 2 classes is fitted one-vs-rest, K binary problems "class k (+1) vs
    the rest (-1)" run together (:mod:`bayes_maxmargin.estimators.multiclass`: one vmapped EM / VB / NUTS / SVI
    program, one Gibbs run over the stacked chains of all classes), with per-class keys
    ``fold_in(key, k)``. ``predict_latent`` and ``decision_function`` then have one column per
    class, ``predict_proba`` holds the K probit probabilities Phi(m_k / sqrt(1 + v_k))
    normalised over the classes, ``predict`` the class of the largest margin. Fitted attributes
    get a leading class axis (below), ``idata_`` a ``class`` dimension, and ``estimators_`` holds
    the K binary fits.

    Parameters
    ----------
    inference : {"gibbs", "em", "nuts", "vb", "svi"}
        Conjugate Gibbs sampler, EM / ECM for the MAP, NUTS on the marginal program (these three
        for ``prior="gaussian"`` without groups or missing values; Gibbs for every model),
        mean-field VB (Luts & Ormerod 2014, Algorithms 1-4), or stochastic natural-gradient VI
        on minibatches (Wenzel et al. 2017, Sec. 4.5, eq. 14; ``max_iter`` steps of
        ``batch_size`` points, ``step_size`` as in :class:`GPBSVM`).
    prior : {"gaussian", "penalty", "laplace_zero"}
        Prior of the feature coefficients (see above).
    rho : float
        Prior inclusion probability of the Laplace-zero prior, in (0, 1) (paper: 0.01).
    A_u, B_u : float
        Shape and scale of the IG prior on sigma_u^2 (paper: 0.01, 0.01).
    missing : {"error", "model"}
        NaN in X is rejected ("error") or modelled ("model", with ``prior="penalty"``): missing
        at random given the observed predictors (MCAR / MAR), imputed under the normal /
        inverse-Wishart model with the paper's sigma_mu^2 = 1e8, Psi = 0.01 I and
        nu = max(3, d) (the paper's 3; at least d so that the inverse Wishart is proper).
    sigma : float
        Prior standard deviation of the coefficients.
    intercept_scale : float or None
        Prior standard deviation of the intercept; None for a flat prior.
    fit_intercept : bool
        Whether to fit an intercept.
    gamma : float
        Hinge scale (fixed), or the initial value when ``gamma_prior`` is given.
    gamma_prior : (float, float) or None
        Shape and rate (a0, b0) of a Gamma prior on gamma; None keeps gamma fixed. EM needs a0 > 1.
    gamma0 : float
        Rate of the exponential prior on the augmentation variables; 0 is the hinge. With
        ``gamma0_prior``: the chains' initial gamma0 (0: the prior mean).
    gamma0_prior : (float, float) or None
        Gibbs only: shape and rate of a Gamma prior on gamma0, which is then sampled from its
        conjugate conditional Ga(shape + N, rate + sum_n lambda_n)
        (:func:`~bayes_maxmargin.core.augmentation.gamma0_conditional`); its draws are
        ``idata_.posterior["gamma0"]``. None keeps gamma0 fixed.
    num_samples, num_warmup, num_chains, thin : int
        Kept draws per chain, warm-up iterations, chains, iterations per kept draw (MCMC).
    overrelaxation : float
        Gibbs only: Adler overrelaxation alpha in (-1, 1) of the coefficient draw. Every alpha
        leaves the posterior invariant; alpha near -1 suppresses the random walk caused by the
        coupling of coefficients and augmentation variables (the default -0.9 gave 2-3.5 times the
        minimum ESS of the plain draw, alpha = 0, in ``benchmarks/gibbs_vs_nuts.py``).
    marginal_moves : bool
        Gibbs only (every prior, not for p > n): start each sweep with slice moves of the
        coefficients along the whitened directions of their posterior, estimated in warm-up, with
        lambda integrated out (:mod:`~bayes_maxmargin.models.linear.gibbs`,
        :mod:`~bayes_maxmargin.models.luts.gibbs`). The sweep keeps its exact target; on breast
        cancer it raised the intercept's effective draws per draw from 0.09 to 0.5.
    max_iter : int
        Maximum EM or VB iterations (interior-point steps with ``solver="interior_point"``).
    tol : float
        EM stops when the relative increase of the log posterior is below ``tol``
        (``solver="fixed_point"``) or when the duality gap, an upper bound on the log posterior's
        distance to its maximum, is at most ``tol`` max(P, 1) (``solver="interior_point"``; P the
        minimised SVM objective); VB when the increase of its lower bound is below ``tol`` (the
        paper's 1e-10).
    accelerate : bool
        VB only: iterate SQUAREM cycles of three coordinate-ascent sweeps
        (:func:`~bayes_maxmargin.engine.fixed_point.squarem_cycle`; same fixed point, monotone bound,
        tens of times fewer sweeps on spam) instead of the paper's single sweeps.
    solver : {"fixed_point", "interior_point"}
        EM only, for the hinge with gamma fixed (``gamma0=0``, ``gamma_prior=None``), whose MAP is the
        linear SVM with C = 2 gamma sigma^2: ``"fixed_point"`` iterates Polson & Scott's EM, which
        converges sublinearly near the hinge (a margin point needs E[1/lambda] = 1 / ``|u|`` -> infinity);
        ``"interior_point"`` solves the same QP by a primal-dual interior-point method with an exact
        active-set crossover (:func:`~bayes_maxmargin.models.linear.em.linear_map`: a few dozen steps,
        each costing one EM iteration) and stops on the duality gap. ``gamma_prior`` (ECM for gamma)
        and ``gamma0 > 0`` (skewed Laplace) always use the fixed-point iteration. Both reach the same
        MAP; the default converges at its defaults where the fixed point stops at ``max_iter``.
    precision : {"float64", "float32"}
        Floating-point precision of the computation (local; the global JAX setting is untouched).
    progress_bar : bool
        Show the fit's progress on stderr ("compiling", then iterations) once it has run for a second,
        for every inference method (:mod:`bayes_maxmargin.core.progress`).
    random_state : int, RandomState, JAX PRNG key or None
        Seed of the sampler.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Posterior mean (MCMC) or MAP (EM) of beta; one row per one-vs-rest problem for K > 2
        classes (as scikit-learn's linear classifiers).
    intercept_ : ndarray of shape (1,) or (n_classes,)
    gamma_ : float or ndarray of shape (n_classes,)
        Posterior mean, MAP or fixed value of gamma.
    idata_ : xarray.DataTree
        ArviZ's DataTree: posterior draws (for EM, SVI and VB independent draws of the Gaussian the fit
        predicts with, named in ``posterior.attrs["approximation"]``; an estimated gamma of EM and VB's
        E[sigma_u^2] in ``constant_data``), sample_stats with the log joint (and the EM objective trace
        or the lower bound), observed_data, and log_likelihood when ``gamma0 > 0`` or ``gamma0_prior``
        is given (Gibbs with ``gamma0_prior``: gamma0's draws in the posterior). For K > 2 classes every
        variable has a leading ``class`` dimension (the class labels as strings; traces of different
        lengths padded with NaN).
    estimators_ : list of LinearBSVM
        K > 2 classes only: the binary fits, ``estimators_[k]`` for ``classes_[k]`` vs rest
        (labels -1 / +1). The other fitted attributes below are theirs stacked along a leading
        class axis (arrays of different lengths, e.g. ``objective_``, as lists).
    n_iter_ : int or ndarray of shape (n_classes,)
        EM iterations run, VB sweeps run, or MCMC iterations per chain (warm-up included).
    objective_ : ndarray
        Log posterior after every EM iteration (EM only).
    lower_bound_ : ndarray
        The VB lower bound log p(y; q) after every iteration (VB only).
    coef_cov_ : ndarray
        VB only: covariance of q over (features, intercept, random intercepts), the order of
        ``coef_``, ``intercept_``, ``random_effects_``. Not set by a fit in the n-dimensional form
        (see Notes): q is then held without any p x p matrix.
    sigma_u2_ : float
        Posterior mean of sigma_u^2 (penalty, Laplace-zero, random-intercept and missing-data fits).
    inclusion_probabilities_ : ndarray of shape (n_features,)
        P(gamma_k = 1 | y) (``prior="laplace_zero"``).
    groups_ : ndarray
        The group labels seen in ``fit(..., groups=)``.
    random_effects_ : ndarray of shape (n_groups,)
        Posterior means of the random intercepts, aligned with ``groups_``.
    X_imputed_ : ndarray of shape (n_samples, n_features)
        Training X with posterior means at the missing entries (``missing="model"``).
    imputation_mean_, imputation_cov_ : ndarray
        Posterior means of mu and Sigma of the imputation model (``missing="model"``); NaN
        entries of X at prediction are integrated over it (see :meth:`predict_latent`).

    Notes
    -----
    Wide data. With more coefficients than training points (p = n_features + intercept > n) and
    a proper prior on every coefficient (``intercept_scale`` not None), the Gaussian conditional
    of the coefficients is handled in its n-dimensional form (Woodbury identity), O(n^2 p) per
    iteration instead of O(n p^2 + p^3): EM (and ECM) and VB (Algorithms 1-3: every prior, and
    ``groups=``) reach the same fixed point, VB then predicting from a low-rank posterior
    (diagonal minus rank n; no ``coef_cov_``), and Gibbs (Appendices A-B) draws the coefficients by
    the exact algorithm of Bhattacharya, Chakraborty & Mallick (2016, Biometrika), the same
    conditional with other random numbers than the p-dimensional draw. The Laplace-zero indicators
    are updated one at a time as in the paper, in O(n) each. The mixing check of a wide
    Luts & Ormerod Gibbs fit reads the features' coefficients in the row space of X (r <= n), the
    intercept, the random intercepts, sigma_u^2 and the number of included features (given sigma_u^2
    the rest of the penalty and random-intercept coefficients are prior draws; for the
    Laplace-zero prior these are the quantities the data inform, and the p indicators are left to
    ``convergence_summary``). NUTS (n_features > n) and SVI work in the r <= n dimensions
    of the row space of the whitened design (:mod:`~bayes_maxmargin.models.linear.row_space`): NUTS
    samples them (in coordinates that make the n margins y f variables of their own when the
    design with its intercept has full row rank, gamma is fixed and the hinge is steep on the
    prior's scale) and draws the rest of beta from its prior, exactly; the mixing check reads the
    coordinates the chains move. SVI takes the same natural-gradient steps with an r x r state and
    returns a low-rank q(beta). The form is chosen by one rule for every prior and inference
    (:func:`~bayes_maxmargin.core.augmentation.use_wide_form`): more coefficients (features,
    intercept and random intercepts; NUTS: features) than points and a proper prior on each (the
    Luts & Ormerod models' flat intercept is their sigma_beta^2 = 1e8); p <= n fits are unchanged. A
    flat intercept prior (``intercept_scale=None``) with ``prior="gaussian"`` and no groups (except for
    NUTS), and ``missing="model"`` (its imputation model has a d x d covariance) keep the
    p-dimensional form.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from bayes_maxmargin import LinearBSVM
    >>> X, y = make_classification(n_samples=100, n_features=4, random_state=0)
    >>> clf = LinearBSVM(inference="em").fit(X, y)  # MAP by EM, in seconds
    >>> clf.coef_.shape
    (1, 4)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    >>> bool(clf.score(X, y) > 0.8)
    True

    Posterior draws by Gibbs sampling (use the defaults, 4 chains of 500 + 1000, for real work),
    then the convergence checks on ``idata_``:

    >>> clf = LinearBSVM(num_warmup=50, num_samples=50, num_chains=2, progress_bar=False,
    ...                  random_state=0).fit(X, y)
    >>> clf.idata_.posterior["beta"].shape
    (2, 50, 4)
    """

    def __init__(
        self,
        inference: str = "gibbs",
        *,
        sigma: float = 1.0,
        intercept_scale: float | None = 10.0,
        fit_intercept: bool = True,
        gamma: float = 1.0,
        gamma_prior: tuple[float, float] | None = None,
        gamma0: float = 0.0,
        gamma0_prior: tuple[float, float] | None = None,
        num_samples: int = 1000,
        num_warmup: int = 500,
        num_chains: int = 4,
        thin: int = 1,
        overrelaxation: float = -0.9,
        marginal_moves: bool = True,
        max_iter: int = 1000,
        tol: float = 1e-10,
        accelerate: bool = True,
        solver: str = "interior_point",
        precision: str = "float64",
        progress_bar: bool = True,
        random_state: Any = None,
        prior: str = "gaussian",
        rho: float = 0.01,
        A_u: float = 0.01,
        B_u: float = 0.01,
        missing: str = "error",
        batch_size: int = 100,
        step_size: Any = "robbins_monro",
        devices: int | None = None,
    ) -> None:
        self.inference = inference
        self.batch_size = batch_size
        self.step_size = step_size
        self.devices = devices
        self.prior = prior
        self.rho = rho
        self.A_u = A_u
        self.B_u = B_u
        self.missing = missing
        self.sigma = sigma
        self.intercept_scale = intercept_scale
        self.fit_intercept = fit_intercept
        self.gamma = gamma
        self.gamma_prior = gamma_prior
        self.gamma0 = gamma0
        self.gamma0_prior = gamma0_prior
        self.num_samples = num_samples
        self.num_warmup = num_warmup
        self.num_chains = num_chains
        self.thin = thin
        self.overrelaxation = overrelaxation
        self.marginal_moves = marginal_moves
        self.max_iter = max_iter
        self.tol = tol
        self.accelerate = accelerate
        self.solver = solver
        self.precision = precision
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _checked_params(self) -> LinearSettings:
        p: dict[str, Any] = {
            "method": LINEAR_METHODS.check(self.inference),
            "batch_size": check_scalar_param("batch_size", self.batch_size, kind="int", low=1),
            "devices": check_scalar_param("devices", self.devices, kind="int", low=1, allow_none=True),
            "prior": check_option("prior", self.prior, ("gaussian", "penalty", "laplace_zero")),
            "missing": check_option("missing", self.missing, ("error", "model")),
            "rho": check_scalar_param("rho", self.rho, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False),
            "A_u": check_scalar_param("A_u", self.A_u, low=0.0, low_inclusive=False),
            "B_u": check_scalar_param("B_u", self.B_u, low=0.0, low_inclusive=False),
            "precision": check_option("precision", self.precision, ("float32", "float64")),
            "sigma": check_scalar_param("sigma", self.sigma, low=0.0, low_inclusive=False),
            "intercept_scale": check_scalar_param(
                "intercept_scale", self.intercept_scale, low=0.0, low_inclusive=False, allow_none=True
            ),
            "gamma": check_scalar_param("gamma", self.gamma, low=0.0, low_inclusive=False),
            "gamma0": check_scalar_param("gamma0", self.gamma0, low=0.0),
            "num_samples": check_scalar_param("num_samples", self.num_samples, kind="int", low=1),
            "num_warmup": check_scalar_param("num_warmup", self.num_warmup, kind="int", low=0),
            "num_chains": check_scalar_param("num_chains", self.num_chains, kind="int", low=1),
            "thin": check_scalar_param("thin", self.thin, kind="int", low=1),
            "overrelaxation": check_scalar_param(
                "overrelaxation", self.overrelaxation, low=-1.0, high=1.0, low_inclusive=False,
                high_inclusive=False,
            ),
            "max_iter": check_scalar_param("max_iter", self.max_iter, kind="int", low=1),
            "tol": check_scalar_param("tol", self.tol, low=0.0),
            "solver": check_option("solver", self.solver, ("fixed_point", "interior_point")),
        }
        for name in ("fit_intercept", "accelerate", "marginal_moves"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"Invalid value for {name}: {getattr(self, name)!r} (must be a bool)")
        p["accelerate"] = bool(self.accelerate)
        p["marginal_moves"] = bool(self.marginal_moves)
        p["gamma_prior"] = _check_gamma_prior(self.gamma_prior, needs_mode=p["method"].mode)
        p["gamma0_prior"] = _check_gamma0_prior(self.gamma0_prior, p["method"])
        if p["missing"] == "model" and p["prior"] != "penalty":
            raise InvalidParameterError(
                f"Invalid value for missing: 'model' needs prior='penalty' (got prior={p['prior']!r}); "
                "the missing-predictor model of Luts & Ormerod (2014, Sec. 3.3) extends the penalty model"
            )
        return LinearSettings(**p)

    def _check_luts(self, params: LinearSettings, reason: str) -> None:
        """The Luts & Ormerod models: unit hinge scale, an intercept, VB or Gibbs."""
        if not params.method.luts:
            able = " or ".join(map(repr, LINEAR_METHODS.names(lambda m: m.luts)))
            raise InvalidParameterError(
                f"Invalid value for inference: {params.inference!r} ({reason} is fitted by inference={able})"
            )
        if (params.gamma != 1.0 or params.gamma_prior is not None or params.gamma0 != 0.0
                or params.gamma0_prior is not None):
            raise InvalidParameterError(
                f"Invalid value for gamma / gamma_prior / gamma0 / gamma0_prior: {reason} uses Luts & Ormerod's "
                "hinge exp(-2 (1 - y f)_+) (gamma=1, gamma_prior=None, gamma0=0, gamma0_prior=None); scale the "
                "prior instead"
            )
        if not self.fit_intercept and reason != "inference='vb'":
            raise InvalidParameterError(f"Invalid value for fit_intercept: False ({reason} has an intercept)")

    # ------------------------------------------------------------------ fitting
    @reports_progress
    def fit(self, X: Any, y: Any, groups: Any = None, *, checkpoint: Any = None, resume: Any = None) -> "LinearBSVM":
        """Fit the posterior (Gibbs, NUTS, VB) or the MAP (EM) of the linear Bayesian SVM.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN entries only with ``missing="model"``.
        y : array-like of shape (n_samples,)
            Two or more classes of any label type; K > 2 classes are fitted one-vs-rest.
        groups : array-like of shape (n_samples,), optional
            Group labels: adds a random intercept per group (Luts & Ormerod 2014, Sec. 3.1,
            Example 2).
        checkpoint : path, optional
            Folder that receives a checkpoint after every chunk of iterations (EM, VB and NUTS:
            :func:`~bayes_maxmargin.engine.resumable.run_resumable`; K > 2 classes in one); Ctrl-C, SIGTERM
            or an error leave it (Gibbs and NUTS: and the draws so far, ``idata.nc``).
        resume : path, optional
            A checkpoint folder of the same fit (same data, parameters and ``random_state``) to
            continue from; on the CPU the result equals an uninterrupted fit.

        Returns
        -------
        self
        """
        if self._fit_multiclass(X, y, groups=groups, checkpoint=checkpoint, resume=resume):
            return self
        params = self._checked_params()
        params = replace(params, run_io=self._run_io(params.inference, checkpoint, resume))
        X, y = self._fit_input(
            X, y, allow_nan=params.missing == "model",
            nan_hint="Pass missing='model' with prior='penalty' to impute them (Luts & Ormerod 2014, Sec. 3.3).",
        )
        for attr in ("groups_", "random_effects_", "inclusion_probabilities_", "X_imputed_", "lower_bound_",
                     "sigma_u2_", "objective_", "coef_cov_", "imputation_mean_", "imputation_cov_"):
            if hasattr(self, attr):
                delattr(self, attr)
        Z = self._group_design_fit(groups, X.shape[0])
        nan = np.isnan(X)
        if nan.any():
            empty = np.flatnonzero(nan.all(axis=0))
            if empty.size:
                raise ValueError(
                    f"Input X has no observed value in column(s) {empty.tolist()}; an entirely missing "
                    "column cannot be imputed (drop it)"
                )
        reason = None
        if params.prior != "gaussian":
            reason = f"prior={params.prior!r}"
        elif Z is not None:
            reason = "fit(..., groups=)"
        elif params.method.luts_only:
            reason = f"inference={params.inference!r}"
        if Z is not None and params.prior != "gaussian":
            raise InvalidParameterError(
                f"Invalid value for prior: {params.prior!r} with groups= (the random intercept model "
                "of Luts & Ormerod 2014, Example 2, has prior='gaussian' fixed effects)"
            )
        if reason is not None:
            self._check_luts(params, reason)
            try:
                coordinates = self._fit_luts(X, y, Z, nan, params)
            except NonFiniteStateError as err:
                if not params.method.samples or min(params.A_u, params.B_u) >= 1.0:
                    raise
                raise NonFiniteStateError(
                    f"{err} The prior IG(A_u={params.A_u}, B_u={params.B_u}) of sigma_u^2 is nearly flat "
                    "in log sigma_u: where the classes are (nearly) separable (missing entries count as free), its "
                    "posterior reaches values (1e20 and beyond) at which the updates overflow. Pass A_u and B_u of 1 "
                    "or more, a prior that bounds it."
                ) from err
            if Z is None:  # with a random intercept the groups also separate
                self._note_separable(X, y, params)
            self._check_mixing(coordinates)
            return self
        x64 = params.precision == "float64"
        dtype = np.float64 if x64 else np.float32
        design = np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X
        if params.method.streams:
            with float_precision(x64):
                fit = params.method.fit(self, design, y, params, dtype)
            self._store(design, fit, y, params)
            return self
        with float_precision(x64):
            data = LinearData(jnp.asarray(design, dtype), jnp.asarray(y, dtype))
            a0, b0 = params.gamma_prior or (1.0, 1.0)
            hyper = LinearHyper(
                jnp.asarray(
                    prior_precision(X.shape[1], params.sigma, params.intercept_scale, self.fit_intercept),
                    dtype,
                ),
                *(jnp.asarray(v, dtype) for v in (params.gamma, a0, b0,
                                                  *_gamma0_hyper(params.gamma0, params.gamma0_prior))),
            )
            params = replace(params, wide=use_wide_form(*design.shape, hyper.prior_prec))
            key = self._fit_key()
            fit = params.method.fit(self, key, data, hyper, params)
        self._store(design, fit, y, params)
        self._note_separable(X, y, params)
        self._check_mixing(self._chain_coordinates(X, design, fit, hyper, params))
        return self

    def _note_separable(self, X: np.ndarray, y: np.ndarray, params) -> None:
        """Record, for the fit's warning, whether the training classes of an MCMC fit are linearly
        separable: the posterior-mean hyperplane classifies every training point correctly (a sufficient
        condition). Not checked for p >= n - 1, where classes in general position always are, nor with
        missing entries."""
        if params.method.samples and X.shape[1] < X.shape[0] - 1 and not np.isnan(X).any():
            self._separable = bool(np.all(y * self.decision_function(X) > 0))

    def _chain_coordinates(self, X, design, fit: LinearFit, hyper, params) -> Any:
        """What the chains of a wide Gibbs or NUTS fit move, for its mixing check (None for other fits:
        the posterior is checked): the whitened coefficients' coordinates in the row space of the whitened
        design (:mod:`~bayes_maxmargin.models.linear.row_space`; the rest of the coefficients are exact
        prior draws, independent of the chain), NUTS's intercept, and gamma. r <= n + 2 quantities
        instead of the p coefficients."""
        if not fit.wide or not params.method.samples:
            return None
        coef_draws = np.asarray(fit.coef, dtype=np.float64)
        if not params.method.conjugate:  # NUTS samples the intercept apart from beta's row space
            d = X.shape[1]
            draws = {"beta_row_space": row_space(X, np.full(d, params.sigma)).coordinates(coef_draws[..., :d])}
            if self.fit_intercept:
                draws["intercept"] = coef_draws[..., d]
        else:
            rows = row_space(design, np.asarray(hyper.prior_prec, dtype=np.float64) ** -0.5)
            draws = {"coef_row_space": rows.coordinates(coef_draws)}
        if fit.gamma is not None:
            draws["gamma"] = np.asarray(fit.gamma, dtype=np.float64)
        if fit.gamma0 is not None:
            draws["gamma0"] = fit.gamma0
        return to_inference_data(draws)

    def _fit_gibbs(self, key, data, hyper, params):
        sample_gamma = params.gamma_prior is not None
        sample_gamma0 = params.gamma0_prior is not None
        if not params.wide and checkpoint_folder(**params.run_io) is None:
            data = padded_data(data, bucket_rows(data.y.shape[0]))  # one program for nearby sizes
        moves = params.marginal_moves and not params.wide
        hyper = hyper._replace(adapt_steps=jnp.asarray(params.num_warmup, jnp.int32))
        k_run, coef0 = _chain_starts(key, params.num_chains, (data.design.shape[1],), data.design.dtype, 0.5)
        state = init_chains(init_linear, (0, None, None), coef0, data, hyper, sample_gamma=sample_gamma,
                            sample_gamma0=sample_gamma0, directions=moves)
        result = self._solve(
            run_chains,
            build_linear_kernel(sample_gamma, params.overrelaxation, params.wide, sample_gamma0, moves),
            record_linear,
            state,
            k_run,
            data,
            hyper,
            num_warmup=params.num_warmup,
            num_samples=params.num_samples,
            thin=params.thin,
            progress_bar=self.progress_bar,
            **params.run_io,
        )
        self.n_iter_ = result.num_iterations
        s = result.samples
        return LinearFit(s["coef"], s["gamma"] if sample_gamma else None, {"log_joint": s["log_joint"], **result.info},
                         gamma0=np.asarray(s["gamma0"], dtype=np.float64) if sample_gamma0 else None, wide=params.wide)

    def _fit_svi(self, design, y, params, dtype):
        """Linear SVI (Wenzel et al. 2017, Sec. 4.5, eq. 14): natural-gradient steps on q(beta) from
        minibatches of the host data, O(p^3) per step; O(r^3), r <= n, in the row space of the whitened
        design when p > n (:mod:`~bayes_maxmargin.models.linear.row_space`)."""
        n = design.shape[0]
        if params.batch_size > n:
            raise InvalidParameterError(
                f"Invalid value for batch_size: {params.batch_size} (must be between 1 and the number of "
                f"training points N = {n})"
            )
        if params.gamma_prior is not None or params.gamma0 != 0.0:
            raise InvalidParameterError(
                "Invalid value for gamma_prior / gamma0: inference='svi' fits the hinge (gamma0=0) with gamma "
                "fixed (gamma_prior=None)"
            )
        if self.fit_intercept and params.intercept_scale is None:
            raise InvalidParameterError(
                "Invalid value for intercept_scale: None (a flat intercept prior); inference='svi' needs a proper "
                "Gaussian prior on every coefficient for its ELBO (give a number, e.g. 10)"
            )
        prec = np.asarray(prior_precision(self.n_features_in_, params.sigma, params.intercept_scale,
                                          self.fit_intercept))
        seed = self._fit_seed()
        rows = row_space(design, prec**-0.5) if use_wide_form(*design.shape, prec) else None
        if rows is not None:  # q(z) of the r <= n dimensions the data inform (models.linear.row_space)
            design, prec = rows.scores, np.ones(rows.scores.shape[1])
        res, _ = self._solve(
            svi_linear, design, y, np.diag(prec), seed, num_steps=params.max_iter,
            batch_size=params.batch_size, step_size=self.step_size, gamma=params.gamma, dtype=dtype,
            devices=params.devices, **params.run_io,
        )
        if not res.elbo.size:
            raise NonFiniteStateError("SVI produced a non-finite ELBO in its first steps; lower step_size or rescale X.")
        mu, R = (np.asarray(m, dtype=np.float64) for m in natural_moments(res.state.nat))
        self.n_iter_ = int(res.state.step)
        self.elbo_, self.elbo_steps_ = res.elbo, res.steps
        stats = {"elbo": res.elbo[None, None, :]}
        if rows is not None:
            posterior = rows.lift_gaussian(mu, R.T @ R)
            return LinearFit(posterior.mean[None, None], None, stats, posterior, wide=True)
        prec_chol = np.linalg.cholesky(-2.0 * np.asarray(res.state.nat.eta2, dtype=np.float64))
        return LinearFit(mu[None, None], None, stats, PrecisionPosterior(mu, prec_chol))

    def _fit_em(self, key, data, hyper, params):
        estimate_gamma = params.gamma_prior is not None
        coef0 = jnp.zeros(data.design.shape[1], data.design.dtype)
        tol = jnp.asarray(params.tol, coef0.dtype)
        exact = params.solver == "interior_point" and not estimate_gamma and params.gamma0 == 0.0
        if exact:
            res = self._solve_resumable(params.run_io, linear_map, data, hyper, tol, max_iter=params.max_iter,
                                        wide=params.wide)
        else:
            res = self._solve_resumable(
                params.run_io, linear_em, coef0, data, hyper, tol,
                max_iter=params.max_iter, estimate_gamma=estimate_gamma, wide=params.wide,
            )
        n_iter = int(res.n_iter)
        objective = np.asarray(res.objective[: n_iter + 1], dtype=np.float64)
        if not np.all(np.isfinite(objective)) or not np.all(np.isfinite(np.asarray(res.coef))):
            bad = int(np.argmin(np.isfinite(objective))) if not np.all(np.isfinite(objective)) else n_iter
            raise NonFiniteStateError(
                f"EM produced a non-finite log posterior or coefficient at iteration {bad}; check the "
                f"data scale and the hyperparameters{float64_hint(coef0.dtype)}."
            )
        if exact:
            if not bool(res.converged):
                self._warn_duality_gap(float(res.gap), n_iter, params)
        elif n_iter == params.max_iter:
            change = abs(objective[-1] - objective[-2]) / max(abs(objective[-1]), 1.0)
            if change > params.tol:
                warnings.warn(
                    f"EM stopped at max_iter={n_iter} with a relative change of the log posterior "
                    f"of {change:.2e} > tol={params.tol:.0e}; increase max_iter.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        self.n_iter_ = n_iter
        self.objective_ = objective
        coef = np.asarray(res.coef, dtype=np.float64)[None, None]
        gamma = np.asarray(res.gamma, dtype=np.float64)[None, None] if estimate_gamma else None
        stats = {"log_joint": objective[None, None, -1], "objective": objective[None, None, :]}
        if params.wide:
            return LinearFit(coef, gamma, stats, LowRankPosterior.from_conditional(res.conditional), wide=True)
        return LinearFit(coef, gamma, stats, PrecisionPosterior(coef[0, 0], np.asarray(res.conditional.prec_chol,
                                                                                       dtype=np.float64)))

    @staticmethod
    def _warn_duality_gap(gap: float, n_iter: int, params: LinearSettings) -> None:
        """ConvergenceWarning for an interior-point solution whose duality gap missed its tolerance."""
        why = (f"stopped at max_iter={n_iter}" if n_iter == params.max_iter
               else f"stalled after {n_iter} steps (rounding)")
        warnings.warn(
            f"EM (solver='interior_point') {why} with a duality gap of {gap:.2e} above tol={params.tol:.0e} "
            "relative to the objective; increase max_iter or tol (or use float64).",
            ConvergenceWarning,
            stacklevel=4,
        )

    def _fit_nuts(self, key, data, hyper, params):
        X = data.design[:, :-1] if self.fit_intercept else data.design
        kwargs = self._model_kwargs(params)
        # beta's prior is proper; the intercept is a site of its own
        wide = use_wide_form(*X.shape, np.ones(1))
        model, design = linear_bsvm, X
        if wide:  # NUTS on the r <= n dimensions of beta that the data inform (models.linear.row_space)
            rows = row_space(np.asarray(X), np.full(X.shape[1], params.sigma))
            # margin coordinates with gamma fixed (a sampled gamma moves the walls' slope; z is kept then)
            basis = None if params.gamma_prior is not None else margin_basis(rows.scores, self.fit_intercept,
                                                                                params.gamma)
            if basis is None:
                design, kwargs = jnp.asarray(rows.scores, X.dtype), {**kwargs, "sigma": 1.0}
            else:  # in margin coordinates, where the hinge's walls are no steeper than the prior is wide
                model, design = margin_bsvm, jnp.asarray(basis, X.dtype)
                kwargs = {k: v for k, v in kwargs.items() if k != "sigma"}
            key, key_null = jax.random.split(key)
        samples, stats = self._nuts(model, key, (design, data.y), kwargs, num_warmup=params.num_warmup,
                                    num_samples=params.num_samples, num_chains=params.num_chains, thin=params.thin,
                                    run_io=params.run_io)
        self.n_iter_ = params.num_warmup + params.num_samples * params.thin
        if wide:
            if basis is not None:  # the log joint in (z, b), and the draws of the model's own sites
                stats["log_joint"] = stats["log_joint"] - samples.pop("log_jacobian")
                samples = {k: v for k, v in samples.items() if k not in ("v", "w")}
            z = samples["beta"].astype(np.float64)
            noise = np.asarray(jax.random.normal(key_null, z.shape[:-1] + rows.basis.shape[1:]), dtype=np.float64)
            samples["beta"] = rows.lift_draws(z, noise)
            stats["log_joint"] = stats["log_joint"] + rows.log_prior_gap(z, samples["beta"])
        parts = [samples["beta"]]
        if self.fit_intercept:
            parts.append(samples["intercept"][..., None])
        return LinearFit(np.concatenate(parts, axis=-1), samples.get("gamma"), stats, wide=wide)

    def _model_kwargs(self, params: LinearSettings) -> dict[str, Any]:
        """Keyword arguments of :func:`~bayes_maxmargin.models.linear.model.linear_bsvm` for this estimator."""
        return {
            "sigma": params.sigma,
            "intercept_scale": params.intercept_scale,
            "fit_intercept": bool(self.fit_intercept),
            "gamma": params.gamma,
            "gamma_prior": params.gamma_prior,
            "gamma0": params.gamma0,
        }

    def _store(self, design, fit: LinearFit, y, params) -> None:
        """The typed posterior (the draws, or the Gaussian of EM / SVI: ``fit.gaussian``), the fitted
        attributes and ``idata_`` (for EM / SVI: draws of that Gaussian, EM's gamma as constant data)."""
        coef_draws = np.asarray(fit.coef, dtype=np.float64)
        gamma_draws, stats = fit.gamma, fit.stats
        d = self.n_features_in_
        draws = DrawsPosterior(coef_draws.reshape(-1, coef_draws.shape[-1]))
        self._posterior = draws if fit.gaussian is None else fit.gaussian
        mean = draws.mean
        self.coef_ = mean[None, :d]
        self.intercept_ = np.array([mean[d]]) if self.fit_intercept else np.zeros(1)
        self.gamma_ = params.gamma if gamma_draws is None else float(np.mean(gamma_draws))
        approximation, constant = None, None
        if fit.gaussian is not None:
            coef_draws = self._posterior.sample(self._fit_seed(), APPROXIMATION_DRAWS)
            approximation = params.method.approximation
            if gamma_draws is not None:  # EM's estimate of gamma: a point, held fixed
                constant, gamma_draws = {"gamma": np.float64(self.gamma_)}, np.full(coef_draws.shape[:2], self.gamma_)
        posterior = {"beta": coef_draws[..., :d]}
        if self.fit_intercept:
            posterior["intercept"] = coef_draws[..., d]
        if gamma_draws is not None and constant is None:
            posterior["gamma"] = np.asarray(gamma_draws, dtype=np.float64)
        gamma0_draws = fit.gamma0
        if gamma0_draws is not None:
            posterior["gamma0"] = gamma0_draws
        names = getattr(self, "feature_names_in_", None)
        features = list(names) if names is not None else [f"x{j}" for j in range(d)]
        log_lik = None
        if params.gamma0 > 0 or gamma0_draws is not None:
            f = np.einsum("np,cdp->cdn", design, coef_draws)
            log_lik = {"y": _pointwise_log_lik(f, gamma_draws, y, params.gamma, params.gamma0, gamma0_draws)}
        self.idata_ = to_inference_data(
            posterior,
            sample_stats=stats,
            observed_data={"y": y},
            log_likelihood=log_lik,
            constant_data=constant,
            coords={"feature": features, "obs": np.arange(y.shape[0])},
            dims={"beta": ["feature"], "y": ["obs"], "objective": ["em_iteration"]},
            attrs={"model": "linear", "inference": params.inference, "bayes_maxmargin_version": __version__},
            approximation=approximation,
        )

    # ------------------------------------------------------------------ Luts & Ormerod models
    def _group_design_fit(self, groups: Any, n: int) -> np.ndarray | None:
        """Validate ``groups`` and return the group indicator matrix Z (n, m), or None."""
        if groups is None:
            return None
        g = np.asarray(groups, dtype=object) if not hasattr(groups, "to_numpy") else groups.to_numpy(dtype=object)
        if g.ndim != 1 or g.shape[0] != n:
            raise ValueError(f"groups has shape {g.shape}; expected one label per sample, shape ({n},)")
        import pandas as pd

        if pd.isna(g).any():
            raise ValueError(f"groups contains missing (NaN / None) labels at rows {np.flatnonzero(pd.isna(g))[:10].tolist()}")
        try:
            labels = np.unique(np.asarray(g.tolist()))  # sorted labels
        except TypeError:  # labels of mixed, unorderable types: first appearance
            labels = np.asarray(pd.unique(g), dtype=object)
        self.groups_ = labels
        self._group_index = {lab: j for j, lab in enumerate(labels.tolist())}
        codes = np.array([self._group_index[v] for v in g.tolist()])
        return np.eye(len(self.groups_))[codes]

    def _group_design_predict(self, groups: Any, n: int) -> np.ndarray:
        """Indicators of the known groups; rows of unseen groups (or groups=None) are zero, i.e. the
        population-level prediction (the random intercept at its prior mean 0)."""
        m = len(self.groups_)
        Z = np.zeros((n, m))
        if groups is None:
            return Z
        g = np.asarray(groups, dtype=object)
        if g.ndim != 1 or g.shape[0] != n:
            raise ValueError(f"groups has shape {g.shape}; expected one label per sample, shape ({n},)")
        for i, v in enumerate(g.tolist()):
            j = self._group_index.get(v)
            if j is not None:
                Z[i, j] = 1.0
        return Z

    def _fit_luts(self, X: np.ndarray, y: np.ndarray, Z: np.ndarray | None, nan: np.ndarray, params) -> Any:
        """Fit one of Luts & Ormerod's models; store the effective coefficients over [X, 1, Z]. Returns what
        the mixing check reads (:func:`_luts_chain_coordinates`; None: the posterior)."""
        fit = self._luts_fit(X, y, Z, nan, params)
        self._store_luts(fit, y, params, n_groups=0 if Z is None else Z.shape[1])
        return _luts_chain_coordinates(X, fit) if fit.wide else None

    def _luts_fit(self, X: np.ndarray, y: np.ndarray, Z: np.ndarray | None, nan: np.ndarray, params) -> LutsFit:
        """The fit step of Luts & Ormerod's models: VB (Algorithms 1-4) or Gibbs, by the prior and the data."""
        x64 = params.precision == "float64"
        dtype = np.float64 if x64 else np.float32
        n, d = X.shape
        s_int = params.intercept_scale
        sb2_int = 1e8 if s_int is None else s_int**2
        vb = not params.method.samples
        key = self._fit_key()
        chains = params.num_chains
        run = dict(num_warmup=params.num_warmup, num_samples=params.num_samples, thin=params.thin,
                   progress_bar=self.progress_bar, **params.run_io)
        tol, vb_kw = params.tol, dict(max_iter=params.max_iter, accelerate=params.accelerate)
        order = np.r_[1 : d + 1, 0]  # [intercept, features] -> [features, intercept]

        def vb_sigma_u2(st, m):  # E_q[sigma_u^2] = B / (A + m / 2 - 1), where finite
            return float(st.B_sigma / (params.A_u + m / 2 - 1)) if params.A_u + m / 2 > 1 else np.nan

        def gibbs(r, **extra) -> LutsFit:
            s = r.samples
            return LutsFit(stats={"log_joint": np.asarray(s["log_joint"]), **r.info}, num_iterations=r.num_iterations,
                           sigma_u2=s["sigma_u2"], **extra)

        with float_precision(x64):
            yj = jnp.asarray(y, dtype)

            def hyper(sigma_beta2):
                return LutsHyper(jnp.asarray(sigma_beta2, dtype), *(jnp.asarray(v, dtype) for v in (params.A_u, params.B_u, params.rho)),
                                 adapt_steps=jnp.asarray(params.num_warmup, jnp.int32))

            if nan.any():  # Sec. 3.3, Algorithm 4 / Appendix C
                obs = (~nan).astype(dtype)
                data = MissingData(jnp.asarray(np.where(nan, 0.0, X), dtype), jnp.asarray(obs), yj)
                imp = ImputationHyper(jnp.asarray(1e8, dtype), jnp.asarray(0.01 * np.eye(d), dtype),
                                      jnp.asarray(max(3.0, float(d)), dtype))
                h = hyper(sb2_int)

                def imputed(filled, mean, cov) -> Imputation:
                    return Imputation(np.where(nan, np.asarray(filled, dtype=np.float64), X),
                                      np.asarray(mean, dtype=np.float64), np.asarray(cov, dtype=np.float64))

                if vb:
                    res = self._solve_resumable(params.run_io, vb_missing, data, h, imp, tol, **vb_kw)
                    st = res.state
                    nu_q = float(imp.nu) + n
                    return LutsFit(posterior=reordered(missing_posterior(st), order), vb=res,
                                   sigma_u2=vb_sigma_u2(st, d),
                                   # the imputation covariance: E_q[Sigma] of IW(Psi_q, nu + n)
                                   imputation=imputed(st.D_mean, st.mu_mean, np.asarray(st.Psi_q) / (nu_q - d - 1)))
                coef0 = 0.1 * _chain_normals(key, chains, (d + 1,), dtype)
                state = init_chains(init_missing, (0, None, None, None), coef0, data, h, imp,
                                    directions=params.marginal_moves)
                r = self._solve(run_chains, build_missing_kernel(), record_missing, state, key, data, (h, imp), **run)
                s = r.samples
                return gibbs(r, draws=s["coef"][..., order], imputation=imputed(
                    s["D"].mean(axis=(0, 1)), s["mu"].mean(axis=(0, 1)), s["Sigma"].mean(axis=(0, 1))))
            if params.prior == "laplace_zero":  # Sec. 3.2, Algorithm 3 / Appendix B
                data = MixedData(jnp.ones((n, 1), dtype), jnp.asarray(X, dtype), yj)
                h = hyper(sb2_int)
                wide = _luts_wide_form(n, 1 + d)
                if vb:
                    res = self._solve_resumable(params.run_io, vb_laplace_zero, data, h, None, tol, wide=wide, **vb_kw)
                    st = res.state
                    return LutsFit(posterior=reordered(laplace_zero_posterior(st), order), vb=res,
                                   sigma_u2=vb_sigma_u2(st, d), inclusion=np.asarray(st.mu_gamma))
                v0 = 0.1 * _chain_normals(key, chains, (d,), dtype)
                state = init_chains(init_laplace_zero, (None, 0, None, None, None, None),
                                    np.zeros(1, dtype), v0, np.ones(d, dtype), 1.0, data, h,
                                    directions=params.marginal_moves and not wide)
                r = self._solve(run_chains, build_laplace_zero_kernel(wide), record_laplace_zero, state, key, data, h,
                                **run)
                s = r.samples
                draws = np.empty(s["u"].shape[:-1] + (d + 1,))  # [u, beta], C-ordered: no copy to flatten it
                draws[..., :d], draws[..., d:] = s["u"], s["beta"]
                return gibbs(r, draws=draws, inclusion=s["gamma"], wide=wide)
            if params.prior == "penalty" or Z is not None:  # Sec. 3.1, Algorithm 2 / Appendix A
                if Z is None:  # Example 1: X = 1, Z = features
                    data = MixedData(jnp.ones((n, 1), dtype), jnp.asarray(X, dtype), yj)
                    h = hyper(sb2_int)
                    perm = order
                else:  # Example 2: X = [features, 1], Z = group indicators
                    data = MixedData(jnp.asarray(np.hstack([X, np.ones((n, 1))]), dtype), jnp.asarray(Z, dtype), yj)
                    h = hyper(np.r_[np.full(d, params.sigma ** 2), sb2_int])
                    perm = np.arange(d + 1 + Z.shape[1])
                m = data.Z.shape[1]
                wide = _luts_wide_form(n, data.X.shape[1] + m)
                if vb:
                    res = self._solve_resumable(params.run_io, vb_penalty, data, h, tol, wide=wide, **vb_kw)
                    return LutsFit(posterior=reordered(q_posterior(res.state), perm), vb=res,
                                   sigma_u2=vb_sigma_u2(res.state, m))
                coef0 = 0.1 * _chain_normals(key, chains, (data.X.shape[1] + m,), dtype)
                state = init_chains(init_mixed, (0, None, None, None), coef0, 1.0, data, h,
                                    directions=params.marginal_moves and not wide)
                r = self._solve(run_chains, build_mixed_kernel(params.overrelaxation, wide), record_mixed, state, key,
                                data, h, **run)
                return gibbs(r, draws=r.samples["coef"][..., perm], wide=wide)
            # Algorithm 1: prior="gaussian", inference="vb"
            design = self._design(X)
            prec = prior_precision(d, params.sigma, s_int, self.fit_intercept)
            wide = use_wide_form(*design.shape, prec)
            res = self._solve_resumable(params.run_io, vb_gaussian, LinearData(jnp.asarray(design, dtype), yj),
                                        jnp.asarray(prec, dtype), tol, wide=wide, **vb_kw)
            return LutsFit(posterior=q_posterior(res.state), vb=res)  # wide: no p x p matrix

    def _store_luts(self, fit: LutsFit, y: np.ndarray, params, n_groups: int) -> None:
        d = self.n_features_in_
        names = getattr(self, "feature_names_in_", None)
        features = list(names) if names is not None else [f"x{j}" for j in range(d)]
        coords = {"feature": features, "obs": np.arange(y.shape[0])}
        dims = {"beta": ["feature"], "y": ["obs"], "lower_bound": ["vb_iteration"], "inclusion": ["feature"]}
        if n_groups:
            coords["group"] = [str(g) for g in self.groups_]
            dims["random_effects"] = ["group"]
        if fit.vb is not None:  # VB: independent draws of q(beta)
            self.n_iter_ = int(fit.vb.n_iter)
            self.lower_bound_ = np.asarray(fit.vb.lower_bound[: self.n_iter_], dtype=np.float64)
            if not np.all(np.isfinite(self.lower_bound_)):
                raise NonFiniteStateError(
                    f"VB produced a non-finite lower bound; check the data scale{float64_hint(params.precision)}."
                )
            if self.n_iter_ == params.max_iter:
                warnings.warn(f"VB stopped at max_iter={self.n_iter_} before the lower bound converged; increase max_iter.",
                              ConvergenceWarning, stacklevel=3)
            self._posterior = fit.posterior
            if isinstance(self._posterior, CovariancePosterior):  # the n-dimensional form holds no p x p matrix
                self.coef_cov_ = self._posterior.cov
            draws = self._posterior.sample(self._fit_seed(), APPROXIMATION_DRAWS)
            stats = {"lower_bound": self.lower_bound_[None, None]}
            inclusion = fit.inclusion
        else:
            self.n_iter_ = fit.num_iterations
            draws = np.asarray(fit.draws, dtype=np.float64)
            self._posterior = DrawsPosterior(draws.reshape(-1, draws.shape[-1]))
            stats = fit.stats
            inclusion = None if fit.inclusion is None else fit.inclusion.mean(axis=(0, 1))
        mean = self._posterior.mean
        self.coef_ = mean[None, :d]
        self.intercept_ = np.array([mean[d]]) if self.fit_intercept else np.zeros(1)
        posterior = {"beta": draws[..., :d]}
        if self.fit_intercept:
            posterior["intercept"] = draws[..., d]
        if n_groups:
            self.random_effects_ = mean[d + 1 :]
            posterior["random_effects"] = draws[..., d + 1 :]
        constant = None
        if fit.sigma_u2 is not None:
            s2 = np.asarray(fit.sigma_u2, dtype=np.float64)
            self.sigma_u2_ = float(s2.mean())
            if s2.ndim == 2:
                posterior["sigma_u2"] = s2
            else:  # VB: E_q[sigma_u^2], a point in the bound's M-step
                constant = {"sigma_u2": np.float64(self.sigma_u2_)}
        if inclusion is not None:  # Gibbs: draws of the indicators; VB: q's probabilities, an attribute only
            self.inclusion_probabilities_ = np.asarray(inclusion, dtype=np.float64)
            if fit.vb is None:
                posterior["inclusion"] = np.asarray(fit.inclusion, dtype=np.float64)
        if fit.imputation is not None:
            self.X_imputed_, self.imputation_mean_, self.imputation_cov_ = fit.imputation
        self.gamma_ = 1.0
        self.idata_ = to_inference_data(
            posterior, sample_stats=stats, observed_data={"y": y}, constant_data=constant, coords=coords, dims=dims,
            attrs={"model": f"linear-{params.prior}", "inference": params.inference,
                   "bayes_maxmargin_version": __version__},
            approximation="q(beta) of mean-field VB" if fit.vb is not None else None,
        )

    # ------------------------------------------------------------------ prediction
    def predict_latent(self, X: Any, groups: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean and variance of f at ``X``; ``groups`` adds the random intercept
        of known groups (unseen groups, or None: the population level).

        After a fit with missing values (``missing="model"``), NaN entries of ``X`` are integrated
        over the fitted imputation model: x_M | x_O ~ N(mu_M + S_MO S_OO^-1 (x_O - mu_O),
        S_MM - S_MO S_OO^-1 S_OM) with (mu, S) the posterior means of (mu, Sigma); the mean of f
        uses the conditional mean of x_M, its variance adds E[w_M' Cov(x_M | x_O) w_M].
        """
        X = self._predict_input(X, allow_nan=True)
        moments = self._multiclass_latent(X, groups) if self._multiclass else self._binary_latent(X, groups)
        check_finite_output(moments, "predictive mean or variance of f")
        return moments

    def _binary_latent(self, X: np.ndarray, groups: Any) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict_latent` of a binary fit, NaN cells of validated ``X`` integrated over."""
        nan = np.isnan(X)
        if not nan.any():
            return self._latent_moments(X, groups)
        if not hasattr(self, "imputation_mean_"):
            cols = np.flatnonzero(nan.any(axis=0)).tolist()
            raise ValueError(
                f"Input X contains NaN in column(s) {cols}; this model was fitted without missing values, so "
                "it has no imputation model (fit with missing='model' on data with missing values)"
            )
        filled, extra = conditional_fill(X, self.imputation_mean_, self.imputation_cov_, self._weight_moment())
        m, v = self._latent_moments(filled, groups)
        return m, v + extra

    def decision_function(self, X: Any, groups: Any = None) -> np.ndarray:
        """Probit-scale margin m / sqrt(1 + v) (see the base class): shape (n_samples,) for two
        classes, (n_samples, n_classes) for more; ``groups`` as in ``predict_latent``."""
        return probit_margin(*self.predict_latent(X, groups))

    def predict_proba(self, X: Any, groups: Any = None) -> np.ndarray:
        """Class probabilities, columns as ``classes_``: Phi(m / sqrt(1 + v)) for two classes, the
        normalised one-vs-rest probabilities for more (see the base class)."""
        return self._probabilities(*self.predict_latent(X, groups))

    def predict(self, X: Any, groups: Any = None) -> np.ndarray:
        """Class labels: ``classes_[1]`` where the posterior mean of f is positive (two classes),
        the class of the largest one-vs-rest margin (more classes)."""
        return self._labels(self.decision_function(X, groups))

    def _design(self, X: np.ndarray) -> np.ndarray:
        return np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X

    def _weight_moment(self) -> np.ndarray:
        """E[w w'] of the feature weights under the posterior."""
        return self._posterior.weight_moment(self.n_features_in_)

    def _latent_moments(self, X: np.ndarray, groups: Any = None) -> tuple[np.ndarray, np.ndarray]:
        design = self._design(X)
        if hasattr(self, "groups_"):
            design = np.hstack([design, self._group_design_predict(groups, X.shape[0])])
        return self._posterior.latent_moments(design)

    #: What every binary fit sets (:meth:`_check_restored`).
    _FITTED = ("_posterior", "coef_", "intercept_")

    def _check_restored(self) -> None:
        """As the base class; and a binary fit's posterior (what predictions use) must have the width of
        the features, intercept and group effects (its precision factor or covariance square), and
        ``coef_`` / ``intercept_`` must be its mean."""
        super()._check_restored()
        post = self.__dict__.get("_posterior")
        if post is None or self._multiclass:
            return
        d = self.n_features_in_
        p = d + int(bool(self.fit_intercept)) + len(self.__dict__.get("groups_", ()))
        mean = np.asarray(post.mean)
        spread = np.asarray(post[-1])  # the factor, covariance, low-rank half or draws: (., p)
        if mean.shape != (p,) or spread.ndim != 2 or spread.shape[1] != p:
            raise ValueError(f"the posterior has {mean.shape} coefficients, not {p}")
        if isinstance(post, (PrecisionPosterior, CovariancePosterior)) and spread.shape != (p, p):
            raise ValueError(f"the posterior's {post._fields[-1]} has shape {spread.shape}, not {(p, p)}")
        intercept = mean[d] if self.fit_intercept else 0.0
        if np.shape(self.coef_) != (1, d) or np.shape(self.intercept_) != (1,) or not (
                np.allclose(self.coef_, mean[None, :d], rtol=1e-6, atol=1e-9)
                and np.allclose(self.intercept_, intercept, rtol=1e-6, atol=1e-9)):
            raise ValueError("coef_ / intercept_ are not the posterior mean that predictions use")
        idata_post = getattr(self.__dict__.get("idata_"), "posterior", None)
        beta = getattr(idata_post, "beta", None)
        if beta is None:
            return
        # independent draws of q (a deterministic fit) average to coef_ up to Monte Carlo error; the
        # allowance covers coefficients stored at float32 precision
        try:
            check_mean_of_draws("beta", beta, mean[:d], independent="approximation" in idata_post.attrs,
                                allowance=1e-5 * np.abs(mean[:d]) + 1e-6)
        except ValueError as err:
            raise ValueError(f"idata_ is not the posterior of this fit (its mean of beta is not coef_): {err}") from None

    def _restore_saved(self, state: dict[str, Any]) -> None:
        if "_posterior" not in state and "_coef_mean" in state:  # written before the typed posteriors
            state = _posterior_from_attributes(state, self.inference)
        super()._restore_saved(state)


#: The inference methods of :class:`LinearBSVM`, each with its fit step and capabilities (:class:`LinearMethod`):
#: the fit steps of EM, Gibbs and NUTS take the data on the device; SVI's the host design; VB's (and Gibbs's for
#: the models of Luts & Ormerod) the design, the group design and the missing entries.
LINEAR_METHODS: Registry[LinearMethod] = Registry(
    LinearMethod(name="em", fit=LinearBSVM._fit_em, checkpoints=True, mode=True,
                 approximation="the Gaussian conditional of the coefficients at the EM mode"),
    LinearMethod(name="gibbs", fit=LinearBSVM._fit_gibbs, samples=True, checkpoints=True, samples_gamma0=True,
                 conjugate=True, luts=True),
    LinearMethod(name="nuts", fit=LinearBSVM._fit_nuts, samples=True, checkpoints=True),
    LinearMethod(name="vb", fit=LinearBSVM._fit_luts, checkpoints=True, luts=True, luts_only=True),
    LinearMethod(name="svi", fit=LinearBSVM._fit_svi, checkpoints=True, streams=True, approximation="q(beta) of SVI"),
)
LinearBSVM._METHODS = LINEAR_METHODS


def _luts_wide_form(n: int, n_coef: int) -> bool:
    """Whether a Luts & Ormerod model holds its coefficients' Gaussian in the n-dimensional form: the
    rule of every linear fit, :func:`~bayes_maxmargin.core.augmentation.use_wide_form` (more coefficients
    than points, every prior proper), for ``n_coef`` coefficients whose priors are all proper here
    (a flat intercept is the paper's sigma_beta^2 = 1e8)."""
    return use_wide_form(n, n_coef, np.ones(1))


def _luts_chain_coordinates(X: np.ndarray, fit: LutsFit) -> Any:
    """What the chains of a wide Luts & Ormerod Gibbs fit move, for its mixing check: the feature
    coefficients' coordinates in the row space of X (r <= n of them, all the data inform), the intercept,
    the random intercepts, sigma_u^2 and, for the Laplace-zero prior, the number of included features.

    For ``prior="penalty"`` and ``groups=`` this is what the chains move: given sigma_u^2 (and the
    fixed prior of the features under ``groups=``) the features' coefficients orthogonal to the rows of X
    are a draw of their isotropic prior, independent of the rest. Under the Laplace-zero prior they are
    not (each v_k has its own scale b_k): there the check reads the quantities the data inform, and the
    p indicators and coefficients are left to :func:`~bayes_maxmargin.diagnostics.convergence_summary`
    (checking them took longer than the sampling).
    """
    d = X.shape[1]
    draws = np.asarray(fit.draws, dtype=np.float64)
    basis = row_space(X, np.ones(d)).basis  # the coordinates of an isotropic prior's coefficients: basis @ w
    to_rows = np.vstack([basis.T, np.zeros((draws.shape[-1] - d, basis.shape[0]))])  # the other coefficients: 0
    chains = {"coef_row_space": draws @ to_rows, "intercept": draws[..., d]}
    if draws.shape[-1] > d + 1:
        chains["random_effects"] = draws[..., d + 1:]
    chains["sigma_u2"] = np.asarray(fit.sigma_u2, dtype=np.float64)
    if fit.inclusion is not None:
        chains["model_size"] = np.sum(fit.inclusion, axis=-1, dtype=np.float64)
    return to_inference_data(chains)


def _posterior_from_attributes(state: dict[str, Any], inference: str) -> dict[str, Any]:
    """The typed posterior of a file written before there were typed posteriors: its ``_luts`` dict
    (Luts & Ormerod fits: ``mean`` and ``cov``, or ``draws``), or ``_coef_mean`` with ``_prec_chol``
    (EM, SVI) or ``_coef_draws``."""
    state = dict(state)
    luts, draws = state.pop("_luts", None), state.pop("_coef_draws", None)
    mean, prec_chol = state.pop("_coef_mean"), state.pop("_prec_chol", None)
    if luts is not None:
        post = CovariancePosterior(luts["mean"], luts["cov"]) if "cov" in luts else DrawsPosterior(luts["draws"])
    elif not LINEAR_METHODS.check(inference).samples:
        post = PrecisionPosterior(mean, prec_chol)
    else:
        post = DrawsPosterior(draws)
    state["_posterior"] = post
    return state
