"""scikit-learn compatible Bayesian SVM classifiers (the user-facing API)."""

from __future__ import annotations

import warnings
from functools import partial
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jax.scipy.linalg import cho_solve
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import __version__
from .augmentation import log_pseudo_likelihood
from . import multiclass as _mc
from .compilation import jit
from .data.validation import (
    BinaryLabelEncoder,
    InvalidParameterError,
    check_kernel_params,
    OneVsRestLabelEncoder,
    n_classes_of,
    check_array_2d,
    check_n_features,
    check_option,
    check_scalar_param,
    check_X_y,
)
from .diagnostics import to_inference_data
from .inference.driver import NonFiniteStateError, run_chains
from .linalg import float_precision
from .inference.em import linear_em
from .inference.gibbs import LinearData, build_linear_kernel, init_linear, record_linear
from .inference.fitc import fitc_alpha, fitc_ecm, fitc_factors, fitc_predict, init_inducing
from .inference.gp_ecm import (
    ML2_OPTIMIZERS,
    gp_ecm,
    gp_ecm_mlii,
    gp_predict,
    gp_predict_from_draws,
    gp_predict_from_theta_draws,
    support_vectors,
)
from .inference.gp_gibbs import build_gp_kernel, gp_alpha, gp_data, init_gp, record_gp
from .inference.gp_theta import build_gp_theta_kernel, build_gp_theta_record, gp_theta_data, init_gp_theta
from .inference.luts_gibbs import (
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
from .inference.nuts import nuts_chains, to_host
from .inference import svi as _svi
from .inference.vb import MissingData, MixedData, vb_gaussian, vb_laplace_zero, vb_missing, vb_penalty
from .kernels import ARDParams, SEParams, free_fields, get_kernel, kernel_diag, params_dict
from .linalg import CholeskyError, cholesky_or_raise
from .models.gp import GPHyper, default_kernel_params, gp_bsvm, kernel_prior, prior_covariance
from .models.linear import LinearHyper, linear_bsvm, prior_precision
from .models.luts import ImputationHyper, LutsHyper
from .predict import gaussian_latent_moments, latent_moments_from_draws, probit_margin, probit_predictive

__all__ = ["GPBSVM", "LinearBSVM"]


class _BayesianSVMClassifier(ClassifierMixin, BaseEstimator):
    """Shared behaviour: input validation, label coding, probit predictions, tags, and the
    one-vs-rest multi-class fit of :mod:`bayes_maxmargin.multiclass`.

    Subclasses implement ``fit`` (calling :meth:`_fit_multiclass` first, and routing their solver
    calls through :meth:`_solve` and their keys through :meth:`_fit_key`) and
    ``_latent_moments(X) -> (mean, var)`` of the latent f.
    """

    # ------------------------------------------------------------------ fitting helpers
    def _fit_input(
        self, X: Any, y: Any, allow_nan: bool = False, nan_hint: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        name = type(self).__name__
        if y is None:
            raise ValueError(f"{name} requires y to be passed, but the target y is None.")
        self.__dict__.pop("estimators_", None)
        if hasattr(X, "columns"):
            self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        X, y = check_X_y(X, y, allow_nan=allow_nan, estimator_name=name, nan_hint=nan_hint)
        self._encoder = BinaryLabelEncoder().fit(y)
        self.classes_ = self._encoder.classes_
        self.n_features_in_ = X.shape[1]
        return X, self._encoder.transform(y)

    def _fit_key(self) -> jax.Array:
        """The PRNG key of this fit: from ``random_state``, or ``fold_in(key, k)`` for the binary
        problem k of a one-vs-rest fit."""
        key = self.__dict__.get("_class_key")
        return _random_key(self.random_state) if key is None else key

    def _fit_seed(self) -> int:
        """An integer seed (for host-side generators) drawn like :meth:`_fit_key`."""
        key = self.__dict__.get("_class_key")
        return _random_seed(self.random_state) if key is None else int(jax.random.randint(key, (), 0, 2**31 - 1))

    def _solve(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``; batched over the classes in a one-vs-rest fit
        (:func:`bayes_maxmargin.multiclass.solve`)."""
        return _mc.solve(self, fn, *args, **kwargs)

    def _nuts(self, model, key, model_args, model_kwargs, params):
        """NUTS draws of ``model`` (:func:`~bayes_maxmargin.inference.nuts.nuts_chains`, one
        vmapped program over the classes of a one-vs-rest fit) as host arrays and statistics."""
        return to_host(*self._solve(
            nuts_chains, model, key, model_args, model_kwargs, num_warmup=params["num_warmup"],
            num_samples=params["num_samples"], num_chains=params["num_chains"], thin=params["thin"]))

    def _fit_multiclass(self, X: Any, y: Any, **fit_kwargs: Any) -> bool:
        """Fit a y of K > 2 classes one-vs-rest (:mod:`bayes_maxmargin.multiclass`) and return
        True; return False (doing nothing) for any other y, which the binary fit then handles."""
        if "_ovr_recorder" in self.__dict__ or y is None or n_classes_of(y) <= 2:
            return False
        name = type(self).__name__
        _, y_checked = check_X_y(X, y, allow_nan=True, estimator_name=name)
        params = self.get_params(deep=False)
        for attr in [a for a in vars(self) if a not in params]:
            delattr(self, attr)
        encoder = OneVsRestLabelEncoder(name).fit(y_checked)
        codes = encoder.transform(y_checked)
        key = _random_key(self.random_state)
        subs = []
        for k in range(codes.shape[0]):
            sub = clone(self)
            sub._class_key = jax.random.fold_in(key, k)
            subs.append(sub)
        _mc.fit_one_vs_rest(subs, lambda k: subs[k].fit(X, codes[k], **fit_kwargs))
        for sub in subs:
            del sub._class_key
        self._encoder = encoder
        self.classes_ = encoder.classes_
        self.n_features_in_ = subs[0].n_features_in_
        if hasattr(subs[0], "feature_names_in_"):
            self.feature_names_in_ = subs[0].feature_names_in_
        self.estimators_ = subs
        self.__dict__.update(_mc.combine_attributes(subs))
        if all(hasattr(s, "idata_") for s in subs):
            self.idata_ = _mc.combine_idata(subs, self.classes_)
        return True

    @property
    def _multiclass(self) -> bool:
        return "estimators_" in self.__dict__

    # ------------------------------------------------------------------ prediction
    def _predict_input(self, X: Any, allow_nan: bool = False) -> np.ndarray:
        check_is_fitted(self, "classes_")
        name = type(self).__name__
        X = check_array_2d(X, allow_nan=allow_nan, estimator_name=name)
        check_n_features(X, self.n_features_in_, name)
        return X

    def _multiclass_latent(self, X: np.ndarray, *args: Any) -> tuple[np.ndarray, np.ndarray]:
        """(n, K) predictive means and variances of the K one-vs-rest latent functions."""
        moments = [sub.predict_latent(X, *args) for sub in self.estimators_]
        return np.column_stack([m for m, _ in moments]), np.column_stack([v for _, v in moments])

    def predict_latent(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean and variance of the latent function f at ``X``.

        Shapes (n_samples,) for two classes; (n_samples, n_classes) for K > 2 classes, column k
        that of the binary problem ``classes_[k]`` vs rest (``estimators_[k]``).
        """
        X = self._predict_input(X)
        if self._multiclass:
            return self._multiclass_latent(X)
        return self._latent_moments(X)

    def decision_function(self, X: Any) -> np.ndarray:
        """Probit-scale margin m / sqrt(1 + v) of the posterior predictive of f.

        Two classes: shape (n_samples,); positive values predict ``classes_[1]``. Its sign is the
        sign of the posterior mean of f (the SVM decision rule), and ``predict_proba[:, 1] =
        Phi(decision_function)``, so scores and probabilities rank points identically. K > 2
        classes: shape (n_samples, n_classes), the margins of the K one-vs-rest problems; the
        prediction is the class of the largest. ``predict_latent`` gives m and v themselves.
        """
        return probit_margin(*self.predict_latent(X))

    @staticmethod
    def _probabilities(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
        if mean.ndim == 1:
            p = probit_predictive(mean, var)
            return np.column_stack([1.0 - p, p])
        return _mc.normalised_probabilities(mean, var)

    def _labels(self, score: np.ndarray) -> np.ndarray:
        if score.ndim == 1:
            return self._encoder.inverse_transform(np.where(score > 0, 1.0, -1.0))
        return self._encoder.inverse_transform(np.argmax(score, axis=1))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior predictive class probabilities, columns as ``classes_``.

        Two classes: Phi(m / sqrt(1 + v)) and its complement. K > 2 classes: the one-vs-rest
        probabilities Phi(m_k / sqrt(1 + v_k)) normalised to sum to one over the classes.
        """
        return self._probabilities(*self.predict_latent(X))

    def predict(self, X: Any) -> np.ndarray:
        """Class labels: ``classes_[1]`` where the posterior mean of f is positive (two classes);
        the class of the largest one-vs-rest margin (K > 2 classes)."""
        return self._labels(self.decision_function(X))

    def _run_io(self, params: dict[str, Any], checkpoint: Any, resume: Any) -> dict[str, Any]:
        """``checkpoint`` / ``resume`` of :func:`~bayes_maxmargin.inference.driver.run_chains` and
        :func:`~bayes_maxmargin.inference.svi.run_svi`, checked to apply: only the Gibbs samplers and
        SVI run in chunks (SVI only for binary problems: its K one-vs-rest runs are sequential)."""
        if checkpoint is not None or resume is not None:
            if params["inference"] not in ("gibbs", "svi"):
                raise InvalidParameterError(
                    f"checkpoint / resume apply to inference='gibbs' and 'svi' (the chunked runs), not "
                    f"inference={params['inference']!r}"
                )
            if params["inference"] == "svi" and "_class_key" in self.__dict__:
                raise InvalidParameterError(
                    "checkpoint / resume with inference='svi' apply to binary problems only (a multi-class "
                    "fit runs its one-vs-rest SVI problems together, in one minibatch loop)"
                )
        return {"checkpoint": checkpoint, "resume": resume}

    def _saved_state(self) -> dict[str, Any]:
        """Everything ``fit`` set, for :func:`bayes_maxmargin.save`; the one-vs-rest
        sub-estimators as their parameters and saved states (their draws live in ``idata_``)."""
        params = self.get_params(deep=False)
        state = {k: v for k, v in vars(self).items() if k not in params}
        if "estimators_" in state:
            state["estimators_"] = [
                {"params": sub.get_params(deep=False),
                 "state": {k: v for k, v in sub._saved_state().items() if k != "idata_"}}
                for sub in state["estimators_"]
            ]
        return state

    def _restore_saved(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`_saved_state`, for :func:`bayes_maxmargin.load`."""
        subs = state.pop("estimators_", None)
        self.__dict__.update(state)
        if subs is not None:
            self.estimators_ = []
            for k, saved in enumerate(subs):
                sub = type(self)(**saved["params"])
                sub._restore_saved(dict(saved["state"]))
                if "idata_" in state:
                    sub.idata_ = state["idata_"].isel(**{"class": k})
                self.estimators_.append(sub)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


def _check_gamma_prior(prior: Any, needs_mode: bool) -> tuple[float, float] | None:
    """Validate ``gamma_prior``: None or a pair (a0, b0) > 0; a0 > 1 when the MAP is sought."""
    if prior is None:
        return None
    if isinstance(prior, str) or not hasattr(prior, "__len__") or len(prior) != 2:
        raise InvalidParameterError(
            f"Invalid value for gamma_prior: {prior!r} (must be None or a pair (a0, b0) "
            "of the Gamma prior's shape and rate)"
        )
    a0 = check_scalar_param("gamma_prior[0] (a0)", prior[0], low=0.0, low_inclusive=False)
    b0 = check_scalar_param("gamma_prior[1] (b0)", prior[1], low=0.0, low_inclusive=False)
    if needs_mode and a0 <= 1.0:
        raise InvalidParameterError(
            f"Invalid value for gamma_prior[0] (a0): {a0} (EM / ECM needs a0 > 1 so that the "
            "posterior of gamma has a mode)"
        )
    return a0, b0


def _pointwise_log_lik(f, gamma_draws, y, params) -> np.ndarray:
    """Skewed Laplace log density of u = 1 - y f per draw and observation (gamma0 > 0 only).

    ``f`` has shape (chain, draw, n); ``gamma_draws`` (chain, draw) or None for a fixed gamma."""
    gamma = params["gamma"] if gamma_draws is None else gamma_draws[..., None]
    with float_precision(True):
        return np.asarray(log_pseudo_likelihood(jnp.asarray(1.0 - y * f), gamma, params["gamma0"]))


def _random_seed(random_state: Any) -> int:
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def _random_key(random_state: Any) -> jax.Array:
    return jax.random.PRNGKey(_random_seed(random_state))


@partial(jit, static_argnums=(1, 2, 3))
def _chain_normals(key: jax.Array, num_chains: int, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Standard normal starting points, chain ``c`` from ``fold_in(key, c)``: a chain's start (and,
    with the driver's per-chain keys, its draws) does not depend on how many chains run."""
    keys = jax.vmap(partial(jax.random.fold_in, key))(jnp.arange(num_chains))
    return jax.vmap(lambda k: jax.random.normal(k, shape, dtype))(keys)


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
    the rest (-1)" run together (:mod:`bayes_maxmargin.multiclass`: one vmapped EM / VB / NUTS / SVI
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
        Rate of the exponential prior on the augmentation variables; 0 is the hinge.
    num_samples, num_warmup, num_chains, thin : int
        Kept draws per chain, warm-up iterations, chains, iterations per kept draw (MCMC).
    overrelaxation : float
        Gibbs only: Adler overrelaxation alpha in (-1, 1) of the coefficient draw. Every alpha
        leaves the posterior invariant; alpha near -1 suppresses the random walk caused by the
        coupling of coefficients and augmentation variables (the default -0.9 gave 2-3.5 times the
        minimum ESS of the plain draw, alpha = 0, in ``benchmarks/gibbs_vs_nuts.py``).
    max_iter : int
        Maximum EM or VB iterations.
    tol : float
        EM stops when the relative increase of the log posterior is below ``tol``; VB when the
        increase of its lower bound is below ``tol`` (the paper's 1e-10).
    accelerate : bool
        VB only: iterate SQUAREM cycles of three coordinate-ascent sweeps
        (:func:`~bayes_maxmargin.inference.vb.squarem_cycle`; same fixed point, monotone bound,
        tens of times fewer sweeps on spam) instead of the paper's single sweeps.
    precision : {"float64", "float32"}
        Floating-point precision of the computation (local; the global JAX setting is untouched).
    progress_bar : bool
        Show a progress bar for MCMC runs predicted to take more than a few seconds.
    random_state : int, RandomState or None
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
    idata_ : arviz.InferenceData
        Posterior draws (MAP with chain = draw = 1 for EM), sample_stats with the log joint (and the
        EM objective trace), observed_data, and log_likelihood when ``gamma0 > 0``. For K > 2
        classes every variable has a leading ``class`` dimension (the class labels as strings;
        traces of different lengths padded with NaN).
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
        ``coef_``, ``intercept_``, ``random_effects_``.
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
        num_samples: int = 1000,
        num_warmup: int = 500,
        num_chains: int = 4,
        thin: int = 1,
        overrelaxation: float = -0.9,
        max_iter: int = 1000,
        tol: float = 1e-10,
        accelerate: bool = True,
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
        self.num_samples = num_samples
        self.num_warmup = num_warmup
        self.num_chains = num_chains
        self.thin = thin
        self.overrelaxation = overrelaxation
        self.max_iter = max_iter
        self.tol = tol
        self.accelerate = accelerate
        self.precision = precision
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _checked_params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "inference": check_option("inference", self.inference, ("em", "gibbs", "nuts", "vb", "svi")),
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
        }
        for name in ("fit_intercept", "accelerate"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"Invalid value for {name}: {getattr(self, name)!r} (must be a bool)")
        p["accelerate"] = bool(self.accelerate)
        p["gamma_prior"] = _check_gamma_prior(self.gamma_prior, needs_mode=p["inference"] == "em")
        if p["missing"] == "model" and p["prior"] != "penalty":
            raise InvalidParameterError(
                f"Invalid value for missing: 'model' needs prior='penalty' (got prior={p['prior']!r}); "
                "the missing-predictor model of Luts & Ormerod (2014, Sec. 3.3) extends the penalty model"
            )
        return p

    def _check_luts(self, params: dict[str, Any], reason: str) -> None:
        """The Luts & Ormerod models: unit hinge scale, an intercept, VB or Gibbs."""
        if params["inference"] not in ("vb", "gibbs"):
            raise InvalidParameterError(
                f"Invalid value for inference: {params['inference']!r} ({reason} is fitted by "
                "inference='vb' or 'gibbs')"
            )
        if params["gamma"] != 1.0 or params["gamma_prior"] is not None or params["gamma0"] != 0.0:
            raise InvalidParameterError(
                f"Invalid value for gamma / gamma_prior / gamma0: {reason} uses Luts & Ormerod's hinge "
                "exp(-2 (1 - y f)_+) (gamma=1, gamma_prior=None, gamma0=0); scale the prior instead"
            )
        if not self.fit_intercept and reason != "inference='vb'":
            raise InvalidParameterError(f"Invalid value for fit_intercept: False ({reason} has an intercept)")

    # ------------------------------------------------------------------ fitting
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
            ``inference="gibbs"`` or ``"svi"``: folder that receives a checkpoint after every chunk
            of iterations; Ctrl-C, SIGTERM or an error leave it (Gibbs: and the draws so far,
            ``idata.nc``).
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
        params["run_io"] = self._run_io(params, checkpoint, resume)
        X, y = self._fit_input(
            X, y, allow_nan=params["missing"] == "model",
            nan_hint="Pass missing='model' with prior='penalty' to impute them (Luts & Ormerod 2014, Sec. 3.3).",
        )
        for attr in ("groups_", "random_effects_", "inclusion_probabilities_", "X_imputed_", "lower_bound_",
                     "sigma_u2_", "objective_", "coef_cov_", "imputation_mean_", "imputation_cov_"):
            if hasattr(self, attr):
                delattr(self, attr)
        self._luts = None
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
        if params["prior"] != "gaussian":
            reason = f"prior={params['prior']!r}"
        elif Z is not None:
            reason = "fit(..., groups=)"
        elif params["inference"] == "vb":
            reason = "inference='vb'"
        if Z is not None and params["prior"] != "gaussian":
            raise InvalidParameterError(
                f"Invalid value for prior: {params['prior']!r} with groups= (the random intercept model "
                "of Luts & Ormerod 2014, Example 2, has prior='gaussian' fixed effects)"
            )
        if reason is not None:
            self._check_luts(params, reason)
            self._fit_luts(X, y, Z, nan, params)
            return self
        x64 = params["precision"] == "float64"
        dtype = np.float64 if x64 else np.float32
        design = np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X
        if params["inference"] == "svi":
            with float_precision(x64):
                coef, stats = self._fit_svi(design, y, params, dtype)
            self._store(design, coef, None, stats, y, params)
            return self
        with float_precision(x64):
            data = LinearData(jnp.asarray(design, dtype), jnp.asarray(y, dtype))
            a0, b0 = params["gamma_prior"] or (1.0, 1.0)
            hyper = LinearHyper(
                jnp.asarray(
                    prior_precision(X.shape[1], params["sigma"], params["intercept_scale"], self.fit_intercept),
                    dtype,
                ),
                *(jnp.asarray(v, dtype) for v in (params["gamma"], a0, b0, params["gamma0"])),
            )
            key = self._fit_key()
            fit = {"gibbs": self._fit_gibbs, "em": self._fit_em, "nuts": self._fit_nuts}
            coef_draws, gamma_draws, stats = fit[params["inference"]](key, data, hyper, params)
        self._store(design, coef_draws, gamma_draws, stats, y, params)
        return self

    def _fit_gibbs(self, key, data, hyper, params):
        sample_gamma = params["gamma_prior"] is not None
        k_init, k_run = jax.random.split(key)
        n_chains, p = params["num_chains"], data.design.shape[1]
        coef0 = 0.5 * _chain_normals(k_init, n_chains, (p,), data.design.dtype)
        state = jax.vmap(init_linear, in_axes=(0, None, None, None))(coef0, data, hyper, sample_gamma)
        result = self._solve(
            run_chains,
            build_linear_kernel(sample_gamma, params["overrelaxation"]),
            record_linear,
            state,
            k_run,
            data,
            hyper,
            num_warmup=params["num_warmup"],
            num_samples=params["num_samples"],
            thin=params["thin"],
            progress_bar=self.progress_bar,
            **params["run_io"],
        )
        self.n_iter_ = result.num_iterations
        s = result.samples
        return s["coef"], s["gamma"] if sample_gamma else None, {"log_joint": s["log_joint"]}

    def _fit_svi(self, design, y, params, dtype):
        """Linear SVI (Wenzel et al. 2017, Sec. 4.5, eq. 14): natural-gradient steps on q(beta) from
        minibatches of the host data, O(p^3) per step."""
        n = design.shape[0]
        if params["batch_size"] > n:
            raise InvalidParameterError(
                f"Invalid value for batch_size: {params['batch_size']} (must be between 1 and the number of "
                f"training points N = {n})"
            )
        if params["gamma_prior"] is not None or params["gamma0"] != 0.0:
            raise InvalidParameterError(
                "Invalid value for gamma_prior / gamma0: inference='svi' fits the hinge (gamma0=0) with gamma "
                "fixed (gamma_prior=None)"
            )
        if self.fit_intercept and params["intercept_scale"] is None:
            raise InvalidParameterError(
                "Invalid value for intercept_scale: None (a flat intercept prior); inference='svi' needs a proper "
                "Gaussian prior on every coefficient for its ELBO (give a number, e.g. 10)"
            )
        prec = np.asarray(prior_precision(self.n_features_in_, params["sigma"], params["intercept_scale"],
                                          self.fit_intercept))
        seed = self._fit_seed()
        res, _ = self._solve(
            _svi.svi_linear, design, y, np.diag(prec), seed, num_steps=params["max_iter"],
            batch_size=params["batch_size"], step_size=self.step_size, gamma=params["gamma"], dtype=dtype,
            devices=params["devices"], **params["run_io"],
        )
        if not res.elbo.size:
            raise NonFiniteStateError("SVI produced a non-finite ELBO in its first steps; lower step_size or rescale X.")
        mu, _ = _svi.moments(res.state.nat)
        self.n_iter_ = int(res.state.step)
        self.elbo_, self.elbo_steps_ = res.elbo, res.steps
        self._prec_chol = np.linalg.cholesky(-2.0 * np.asarray(res.state.nat.eta2, dtype=np.float64))
        return np.asarray(mu, dtype=np.float64)[None, None], {"elbo": res.elbo[None, None, :]}

    def _fit_em(self, key, data, hyper, params):
        estimate_gamma = params["gamma_prior"] is not None
        coef0 = jnp.zeros(data.design.shape[1], data.design.dtype)
        res = self._solve(
            linear_em,
            coef0, data, hyper, jnp.asarray(params["tol"], coef0.dtype),
            max_iter=params["max_iter"], estimate_gamma=estimate_gamma,
        )
        n_iter = int(res.n_iter)
        objective = np.asarray(res.objective[: n_iter + 1], dtype=np.float64)
        if not np.all(np.isfinite(objective)) or not np.all(np.isfinite(np.asarray(res.coef))):
            bad = int(np.argmin(np.isfinite(objective))) if not np.all(np.isfinite(objective)) else n_iter
            raise NonFiniteStateError(
                f"EM produced a non-finite log posterior or coefficient at iteration {bad}; check the "
                "data scale and the hyperparameters (or use float64)."
            )
        if n_iter == params["max_iter"]:
            change = abs(objective[-1] - objective[-2]) / max(abs(objective[-1]), 1.0)
            if change > params["tol"]:
                warnings.warn(
                    f"EM stopped at max_iter={n_iter} with a relative change of the log posterior "
                    f"of {change:.2e} > tol={params['tol']:.0e}; increase max_iter.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        self.n_iter_ = n_iter
        self.objective_ = objective
        self._prec_chol = np.asarray(res.conditional.prec_chol, dtype=np.float64)
        coef = np.asarray(res.coef, dtype=np.float64)[None, None]
        gamma = np.asarray(res.gamma, dtype=np.float64)[None, None] if estimate_gamma else None
        stats = {"log_joint": objective[None, None, -1], "objective": objective[None, None, :]}
        return coef, gamma, stats

    def _fit_nuts(self, key, data, hyper, params):
        X = data.design[:, :-1] if self.fit_intercept else data.design
        samples, stats = self._nuts(linear_bsvm, key, (X, data.y), self._model_kwargs(params), params)
        self.n_iter_ = params["num_warmup"] + params["num_samples"] * params["thin"]
        parts = [samples["beta"]]
        if self.fit_intercept:
            parts.append(samples["intercept"][..., None])
        return np.concatenate(parts, axis=-1), samples.get("gamma"), stats

    def _model_kwargs(self, params: dict[str, Any]) -> dict[str, Any]:
        """Keyword arguments of :func:`~bayes_maxmargin.models.linear.linear_bsvm` for this estimator."""
        return {
            "sigma": params["sigma"],
            "intercept_scale": params["intercept_scale"],
            "fit_intercept": bool(self.fit_intercept),
            "gamma": params["gamma"],
            "gamma_prior": params["gamma_prior"],
            "gamma0": params["gamma0"],
        }

    def _store(self, design, coef_draws, gamma_draws, stats, y, params) -> None:
        coef_draws = np.asarray(coef_draws, dtype=np.float64)
        d = self.n_features_in_
        beta = coef_draws[..., :d]
        intercept = coef_draws[..., d] if self.fit_intercept else np.zeros(coef_draws.shape[:2])
        self._coef_draws = coef_draws.reshape(-1, coef_draws.shape[-1])
        self._coef_mean = self._coef_draws.mean(axis=0)
        self.coef_ = beta.reshape(-1, d).mean(axis=0)[None, :]
        self.intercept_ = np.array([intercept.mean()])
        posterior = {"beta": beta}
        if self.fit_intercept:
            posterior["intercept"] = intercept
        if gamma_draws is not None:
            posterior["gamma"] = np.asarray(gamma_draws, dtype=np.float64)
            self.gamma_ = float(posterior["gamma"].mean())
        else:
            self.gamma_ = params["gamma"]
        names = getattr(self, "feature_names_in_", None)
        features = list(names) if names is not None else [f"x{j}" for j in range(d)]
        log_lik = None
        if params["gamma0"] > 0:
            f = np.einsum("np,cdp->cdn", design, coef_draws)
            log_lik = {"y": _pointwise_log_lik(f, posterior.get("gamma"), y, params)}
        self.idata_ = to_inference_data(
            posterior,
            sample_stats=stats,
            observed_data={"y": y},
            log_likelihood=log_lik,
            coords={"feature": features, "obs": np.arange(y.shape[0])},
            dims={"beta": ["feature"], "y": ["obs"], "objective": ["em_iteration"]},
            attrs={"model": "linear", "inference": params["inference"], "bayes_maxmargin_version": __version__},
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

    def _fit_luts(self, X: np.ndarray, y: np.ndarray, Z: np.ndarray | None, nan: np.ndarray, params) -> None:
        """Fit one of Luts & Ormerod's models; store the effective coefficients over [X, 1, Z]."""
        x64 = params["precision"] == "float64"
        dtype = np.float64 if x64 else np.float32
        n, d = X.shape
        s_int = params["intercept_scale"]
        sb2_int = 1e8 if s_int is None else s_int**2
        vb = params["inference"] == "vb"
        key = self._fit_key()
        chains = params["num_chains"]
        run = dict(num_warmup=params["num_warmup"], num_samples=params["num_samples"], thin=params["thin"],
                   progress_bar=self.progress_bar, **params["run_io"])
        tol, vb_kw = params["tol"], dict(max_iter=params["max_iter"], accelerate=params["accelerate"])
        out: dict[str, Any] = {}
        order = np.r_[1 : d + 1, 0]  # [intercept, features] -> [features, intercept]
        with float_precision(x64):
            yj = jnp.asarray(y, dtype)

            def hyper(sigma_beta2):
                return LutsHyper(jnp.asarray(sigma_beta2, dtype), *(jnp.asarray(params[k], dtype) for k in ("A_u", "B_u", "rho")))

            if nan.any():  # Sec. 3.3, Algorithm 4 / Appendix C
                out.update(nan=nan, X=X)
                obs = (~nan).astype(dtype)
                data = MissingData(jnp.asarray(np.where(nan, 0.0, X), dtype), jnp.asarray(obs), yj)
                imp = ImputationHyper(jnp.asarray(1e8, dtype), jnp.asarray(0.01 * np.eye(d), dtype),
                                      jnp.asarray(max(3.0, float(d)), dtype))
                h = hyper(sb2_int)
                if vb:
                    res = self._solve(vb_missing, data, h, imp, tol, **vb_kw)
                    st = res.state
                    nu_q = float(imp.nu) + n
                    out.update(mean=np.asarray(st.mean)[order], cov=np.asarray(st.cov)[np.ix_(order, order)],
                               sigma_u2=float(st.B_sigma / (params["A_u"] + d / 2 - 1)) if params["A_u"] + d / 2 > 1 else np.nan,
                               X_imputed=np.asarray(st.D_mean), res=res, imputation_mean=np.asarray(st.mu_mean),
                               imputation_cov=np.asarray(st.Psi_q) / (nu_q - d - 1))  # E_q[Sigma] of IW(Psi_q, nu + n)
                else:
                    coef0 = 0.1 * _chain_normals(key, chains, (d + 1,), dtype)
                    state = jax.vmap(init_missing, (0, None, None, None))(coef0, data, h, imp)
                    r = self._solve(run_chains, build_missing_kernel(), record_missing, state, key, data, (h, imp), **run)
                    s = r.samples
                    out.update(draws=s["coef"][..., order], sigma_u2=s["sigma_u2"], X_imputed=s["D"].mean(axis=(0, 1)),
                               n_iter=r.num_iterations, log_joint=s["log_joint"],
                               imputation_mean=s["mu"].mean(axis=(0, 1)), imputation_cov=s["Sigma"].mean(axis=(0, 1)))
            elif params["prior"] == "laplace_zero":  # Sec. 3.2, Algorithm 3 / Appendix B
                data = MixedData(jnp.ones((n, 1), dtype), jnp.asarray(X, dtype), yj)
                h = hyper(sb2_int)
                if vb:
                    res = self._solve(vb_laplace_zero, data, h, None, tol, **vb_kw)
                    st = res.state
                    g = np.r_[1.0, np.asarray(st.mu_gamma)]
                    Om_g = np.diag(g * (1 - g)) + np.outer(g, g)
                    mean = g * np.asarray(st.mean)
                    cov = Om_g * (np.asarray(st.cov) + np.outer(st.mean, st.mean)) - np.outer(mean, mean)
                    out.update(mean=mean[order], cov=cov[np.ix_(order, order)], inclusion=np.asarray(st.mu_gamma),
                               sigma_u2=float(st.B_sigma / (params["A_u"] + d / 2 - 1)) if params["A_u"] + d / 2 > 1 else np.nan,
                               res=res)
                else:
                    v0 = 0.1 * _chain_normals(key, chains, (d,), dtype)
                    state = jax.vmap(init_laplace_zero, (None, 0, None, None, None, None))(
                        jnp.zeros(1, dtype), v0, jnp.ones(d, dtype), 1.0, data, h)
                    r = self._solve(run_chains, build_laplace_zero_kernel(), record_laplace_zero, state, key, data, h, **run)
                    s = r.samples
                    out.update(draws=np.concatenate([s["u"], s["beta"]], axis=-1), inclusion_draws=s["gamma"],
                               sigma_u2=s["sigma_u2"], n_iter=r.num_iterations, log_joint=s["log_joint"])
            elif params["prior"] == "penalty" or Z is not None:  # Sec. 3.1, Algorithm 2 / Appendix A
                if Z is None:  # Example 1: X = 1, Z = features
                    data = MixedData(jnp.ones((n, 1), dtype), jnp.asarray(X, dtype), yj)
                    h = hyper(sb2_int)
                    perm = order
                else:  # Example 2: X = [features, 1], Z = group indicators
                    data = MixedData(jnp.asarray(np.hstack([X, np.ones((n, 1))]), dtype), jnp.asarray(Z, dtype), yj)
                    h = hyper(np.r_[np.full(d, params["sigma"] ** 2), sb2_int])
                    perm = np.arange(d + 1 + Z.shape[1])
                m = data.Z.shape[1]
                if vb:
                    res = self._solve(vb_penalty, data, h, tol, **vb_kw)
                    st = res.state
                    L = np.asarray(st.prec_chol, dtype=np.float64)
                    half = np.linalg.solve(L, np.eye(L.shape[0]))  # small: (d + 1 + m) square
                    cov = half.T @ half
                    out.update(mean=np.asarray(st.mean)[perm], cov=cov[np.ix_(perm, perm)],
                               sigma_u2=float(st.B_sigma / (params["A_u"] + m / 2 - 1)) if params["A_u"] + m / 2 > 1 else np.nan,
                               res=res)
                else:
                    coef0 = 0.1 * _chain_normals(key, chains, (data.X.shape[1] + m,), dtype)
                    state = jax.vmap(init_mixed, (0, None, None, None))(coef0, 1.0, data, h)
                    r = self._solve(run_chains, build_mixed_kernel(params["overrelaxation"]), record_mixed, state, key, data, h, **run)
                    s = r.samples
                    out.update(draws=s["coef"][..., perm], sigma_u2=s["sigma_u2"], n_iter=r.num_iterations,
                               log_joint=s["log_joint"])
            else:  # Algorithm 1: prior="gaussian", inference="vb"
                design = self._design(X)
                prec = prior_precision(d, params["sigma"], s_int, self.fit_intercept)
                res = self._solve(vb_gaussian, LinearData(jnp.asarray(design, dtype), yj), jnp.asarray(prec, dtype), tol, **vb_kw)
                st = res.state
                L = np.asarray(st.prec_chol, dtype=np.float64)
                half = np.linalg.solve(L, np.eye(L.shape[0]))
                out.update(mean=np.asarray(st.mean), cov=half.T @ half, res=res)
        self._store_luts(out, y, params, n_groups=0 if Z is None else Z.shape[1])

    def _store_luts(self, out: dict[str, Any], y: np.ndarray, params, n_groups: int) -> None:
        d = self.n_features_in_
        names = getattr(self, "feature_names_in_", None)
        features = list(names) if names is not None else [f"x{j}" for j in range(d)]
        coords = {"feature": features, "obs": np.arange(y.shape[0])}
        dims = {"beta": ["feature"], "y": ["obs"], "lower_bound": ["vb_iteration"], "inclusion": ["feature"]}
        if n_groups:
            coords["group"] = [str(g) for g in self.groups_]
            dims["random_effects"] = ["group"]
        stats: dict[str, np.ndarray] = {}
        if "res" in out:  # VB: variational means, chain = draw = 1
            res = out["res"]
            self.n_iter_ = int(res.n_iter)
            self.lower_bound_ = np.asarray(res.lower_bound[: self.n_iter_], dtype=np.float64)
            if not np.all(np.isfinite(self.lower_bound_)):
                raise NonFiniteStateError("VB produced a non-finite lower bound; check the data scale (or use float64).")
            if self.n_iter_ == params["max_iter"]:
                warnings.warn(f"VB stopped at max_iter={self.n_iter_} before the lower bound converged; increase max_iter.",
                              ConvergenceWarning, stacklevel=3)
            mean = np.asarray(out["mean"], dtype=np.float64)
            self._luts = {"mean": mean, "cov": np.asarray(out["cov"], dtype=np.float64)}
            self.coef_cov_ = self._luts["cov"]
            draws = mean[None, None]
            stats = {"lower_bound": self.lower_bound_[None, None]}
            inclusion = out.get("inclusion")
            sigma_u2 = out.get("sigma_u2")
        else:
            self.n_iter_ = out["n_iter"]
            draws = np.asarray(out["draws"], dtype=np.float64)
            self._luts = {"draws": draws.reshape(-1, draws.shape[-1])}
            mean = self._luts["draws"].mean(axis=0)
            stats = {"log_joint": np.asarray(out["log_joint"])}
            inclusion = out["inclusion_draws"].mean(axis=(0, 1)) if "inclusion_draws" in out else None
            sigma_u2 = out.get("sigma_u2")
        self._coef_mean = mean
        self.coef_ = mean[None, :d]
        self.intercept_ = np.array([mean[d]]) if self.fit_intercept else np.zeros(1)
        posterior = {"beta": draws[..., :d]}
        if self.fit_intercept:
            posterior["intercept"] = draws[..., d]
        if n_groups:
            self.random_effects_ = mean[d + 1 :]
            posterior["random_effects"] = draws[..., d + 1 :]
        if sigma_u2 is not None:
            s2 = np.asarray(sigma_u2, dtype=np.float64)
            self.sigma_u2_ = float(s2.mean())
            posterior["sigma_u2"] = s2 if s2.ndim == 2 else s2.reshape(1, 1)
        if inclusion is not None:
            self.inclusion_probabilities_ = np.asarray(inclusion, dtype=np.float64)
            posterior["inclusion"] = (
                np.asarray(out["inclusion_draws"], dtype=np.float64) if "inclusion_draws" in out
                else self.inclusion_probabilities_[None, None]
            )
        if "X_imputed" in out:
            self.X_imputed_ = np.where(out["nan"], np.asarray(out["X_imputed"], dtype=np.float64), out["X"])
            self.imputation_mean_ = np.asarray(out["imputation_mean"], dtype=np.float64)
            self.imputation_cov_ = np.asarray(out["imputation_cov"], dtype=np.float64)
        self.gamma_ = 1.0
        self.idata_ = to_inference_data(
            posterior, sample_stats=stats, observed_data={"y": y}, coords=coords, dims=dims,
            attrs={"model": f"linear-{params['prior']}", "inference": params["inference"],
                   "bayes_maxmargin_version": __version__},
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
        if self._multiclass:
            return self._multiclass_latent(X, groups)
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
        """E[w w'] of the feature weights under the posterior (VB: Sigma_q + mu mu'; MCMC: draws)."""
        d = self.n_features_in_
        luts = self._luts
        if "cov" in luts:
            m = luts["mean"][:d]
            return luts["cov"][:d, :d] + np.outer(m, m)
        W = luts["draws"][:, :d]
        return W.T @ W / W.shape[0]

    def _latent_moments(self, X: np.ndarray, groups: Any = None) -> tuple[np.ndarray, np.ndarray]:
        design = self._design(X)
        luts = getattr(self, "_luts", None)
        if luts is not None:
            if hasattr(self, "groups_"):
                design = np.hstack([design, self._group_design_predict(groups, X.shape[0])])
            if "cov" in luts:
                return design @ luts["mean"], np.sum((design @ luts["cov"]) * design, axis=1)
            return latent_moments_from_draws(design, luts["draws"])
        if self.inference in ("em", "svi"):
            return gaussian_latent_moments(design, self._coef_mean, self._prec_chol)
        return latent_moments_from_draws(design, self._coef_draws)


def conditional_fill(X: np.ndarray, mean: np.ndarray, cov: np.ndarray, weight_moment: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Fill NaN entries of ``X`` by their conditional means under N(mean, cov) given each row's
    observed entries, and return per row tr(E[w w']_MM Cov(x_M | x_O)), the variance the missing
    entries add to f = w'x. Rows are handled per missingness pattern (one small solve each)."""
    X = np.array(X, dtype=np.float64)
    extra = np.zeros(X.shape[0])
    nan = np.isnan(X)
    patterns, inverse = np.unique(nan, axis=0, return_inverse=True)
    for k, miss in enumerate(patterns):
        if not miss.any():
            continue
        rows = np.flatnonzero(inverse.ravel() == k)
        obs = ~miss
        S_mo, S_mm = cov[np.ix_(miss, obs)], cov[np.ix_(miss, miss)]
        if obs.any():
            L = np.linalg.cholesky(cov[np.ix_(obs, obs)])
            A = scipy.linalg.cho_solve((L, True), S_mo.T).T  # S_MO S_OO^-1
            X[np.ix_(rows, np.flatnonzero(miss))] = mean[miss] + (X[np.ix_(rows, np.flatnonzero(obs))] - mean[obs]) @ A.T
            cond = S_mm - A @ S_mo.T
        else:
            X[np.ix_(rows, np.flatnonzero(miss))] = mean[miss]
            cond = S_mm
        extra[rows] = np.sum(weight_moment[np.ix_(miss, miss)] * cond)
    return X, extra


# ============================================================================ GP Bayesian SVM
#: Inference options of :class:`GPBSVM`, and the gamma0 each uses when ``gamma0=None``: the
#: paper's 0.1 for the samplers, the exact hinge (0, so that alpha is sparse) for ECM and FITC.
_GP_DEFAULT_GAMMA0 = {"ecm": 0.0, "fitc": 0.0, "gibbs": 0.1, "nuts": 0.1, "vi": 0.0, "svi": 0.0}
_GP_KERNELS = ("rbf", "ard", "poly", "linear")
#: Joint draws of (theta, f) used for prediction when theta is sampled (one Cholesky each).
_PREDICT_THETA_DRAWS = 200


def _median_distance(X: np.ndarray, max_rows: int = 1000) -> float:
    """Median Euclidean distance between distinct rows (a seeded subsample of ``max_rows``)."""
    from sklearn.metrics import pairwise_distances

    if X.shape[0] > max_rows:
        X = X[np.random.default_rng(0).choice(X.shape[0], max_rows, replace=False)]
    d = pairwise_distances(X)[np.triu_indices(X.shape[0], k=1)]
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def _initial_kernel_params(kernel: str, user: Any, X: np.ndarray) -> Any:
    """Kernel parameters theta to start from: the defaults (length-scale(s) at the median distance
    between training points, unit amplitude) overridden by the user's ``kernel_params``."""
    d = X.shape[1]
    if kernel in ("rbf", "ard"):
        ell = _median_distance(X)
        defaults = SEParams(ell, 1.0) if kernel == "rbf" else ARDParams(np.full(d, ell), 1.0)
    else:
        defaults = default_kernel_params(kernel, d)
    return check_kernel_params(kernel, user, defaults)


def _free_kernel_fields(params: Any, learn_kernel: Any) -> tuple[str, ...]:
    """The kernel fields ML-II moves (ECM, FITC), from ``learn_kernel``."""
    positive = free_fields(params)
    if isinstance(learn_kernel, (bool, np.bool_)):
        return positive if learn_kernel else ()
    if isinstance(learn_kernel, str) or not hasattr(learn_kernel, "__iter__"):
        raise InvalidParameterError(
            f"Invalid value for learn_kernel: {learn_kernel!r} (must be True, False or a list of "
            f"kernel fields among {', '.join(positive)})"
        )
    names = tuple(learn_kernel)
    for name in names:
        if name not in positive:
            raise InvalidParameterError(
                f"Invalid value for learn_kernel: {name!r} is not a learnable field of this kernel; "
                f"valid fields are {', '.join(positive)}"
            )
    return names


class GPBSVM(_BayesianSVMClassifier):
    """Nonlinear Bayesian SVM with a Gaussian-process prior (Henao et al. 2014).

    f ~ GP(0, k_theta), the hinge pseudo-likelihood exp(-2 gamma max(1 - y f, 0)) (``gamma0 = 0``)
    or the skewed Laplace of eq. (4-5) (``gamma0 > 0``), lambda_n ~ Exp(gamma0) in the augmented
    form (eq. 6), gamma fixed or ~ Ga(a0, b0).

    Multi-class: a y of K > 2 classes is fitted one-vs-rest, K binary problems "class k (+1) vs
    the rest (-1)" run together (:mod:`bayes_maxmargin.multiclass`: one vmapped ECM / FITC / VI
    / NUTS / SVI program, one Gibbs run over the stacked chains of all classes), each with its own
    kernel parameters (ML-II per class) and key ``fold_in(key, k)``. ``predict_latent`` and
    ``decision_function`` then have one column per class, ``predict_proba`` holds the K probit
    probabilities Phi(m_k / sqrt(1 + v_k)) normalised over the classes, ``predict`` the class of
    the largest margin; ``estimators_`` holds the K binary fits, the attributes below are theirs
    stacked along a leading class axis (lists where the shapes differ, e.g. ``support_``,
    ``dual_coef_``, ``kernel_params_``), and ``idata_`` has a ``class`` dimension.

    Parameters
    ----------
    kernel : {"rbf", "ard", "poly", "linear"}
        Covariance function: the paper's squared exponential amplitude * exp(-||x - x'||^2 /
        lengthscale^2), its ARD version, polynomial or linear (:mod:`bayes_maxmargin.kernels`).
    inference : {"ecm", "fitc", "gibbs", "nuts", "vi", "svi"}
        ECM for the MAP of (f, gamma) with ML-II kernel learning (Sec. 3, eq. 8-9); the same under
        the FITC approximation with ``num_inducing`` pseudo-inputs (eq. 10); the conjugate Gibbs
        sampler (eq. 7); NUTS on the marginal program (the reference); or the variational
        inference of Wenzel et al. (2017): batch coordinate ascent on q(f) q(lambda) for the full
        GP ("vi", B-BSVM, Sec. 4.1, kernel fixed) and natural-gradient stochastic VI with
        ``num_inducing`` inducing points ("svi", S-BSVM, Alg. 1), minibatches streamed from host
        memory, ML-II on the kernel (``learn_kernel``) and the inducing locations
        (``optimize_inducing``) every ``mlii_every`` steps (eq. 12). vi and svi use the hinge
        (gamma0 = 0) with gamma fixed.
    kernel_params : dict or None
        Initial (ECM / FITC with ``learn_kernel``) or fixed kernel parameters, e.g.
        ``{"lengthscale": 3.0, "amplitude": 1.0}``; fields not given take the defaults:
        length-scale(s) at the median distance between training points, unit amplitude, degree 2,
        offset 1, unit variance.
    learn_kernel : bool or sequence of str
        Which kernel parameters are learnt. ECM / FITC: ML-II over all positive fields (True), none
        (False), or the named ones (e.g. ``("lengthscale",)``: the paper's SE has no amplitude).
        Gibbs / NUTS: True samples every positive field under an independent log-normal prior
        centred at its initial value (:func:`~bayes_maxmargin.models.gp.kernel_prior`, standard
        deviation ``kernel_prior_scale`` in log space; Gibbs by slice sampling,
        :mod:`~bayes_maxmargin.inference.gp_theta`), False keeps theta fixed.
    kernel_prior_scale : float
        Gibbs / NUTS with ``learn_kernel``: standard deviation of log theta under its prior.
    gamma : float
        Hinge scale (fixed), or the initial value when ``gamma_prior`` is given.
    gamma_prior : (float, float) or None
        Shape and rate (a0, b0) of a Gamma prior on gamma; None keeps gamma fixed. ECM / FITC need
        a0 > 1.
    gamma0 : float or None
        Rate of the exponential prior on lambda; 0 is the hinge. None: 0 for ECM and FITC (sparse
        alpha, eq. 13), the paper's 0.1 for Gibbs and NUTS.
    max_iter : int or None
        ECM iterations in all (ECM, FITC; the paper uses 200), coordinate-ascent sweeps (vi), or
        natural-gradient steps (svi). None: 200, and for svi 20 epochs (at least 1000, at most
        100 000 steps).
    mlii_every : int
        ECM iterations between ML-II steps (Henao et al.: 20); svi: natural-gradient steps per
        ML-II step and per ELBO estimate (Wenzel et al.: 10).
    mlii_steps : int
        Optimiser iterations per ML-II step.
    optimizer : {"lbfgs", "adam"}
        Optax optimiser of ML-II: L-BFGS with a line search (few iterations suffice for the
        handful of kernel parameters) or Adam.
    learning_rate : float
        Adam step size on the unconstrained kernel parameters (and pseudo-inputs); svi always
        uses Adam for its ML-II steps.
    tol : float
        Relative-change tolerance of each ECM run.
    num_inducing : int
        FITC, svi: number M of pseudo-inputs / inducing points, 1 <= M <= N.
    inducing : {"kmeans", "random"}
        FITC, svi: initial pseudo-inputs, k-means++ centres (scikit-learn ``KMeans``;
        ``MiniBatchKMeans`` on a subsample above 50 000 rows) or a random subset of the rows.
    optimize_inducing : bool
        FITC, svi: whether ML-II also moves the pseudo-inputs.
    batch_size : int
        svi: minibatch size ``|S|``, 1 <= ``|S|`` <= N (the paper: 10 on its benchmark sets, 100 on SUSY).
    step_size : float, Optax schedule, "robbins_monro" or "adaptive"
        svi: the natural-gradient step rho_t of Alg. 1, in (0, 1]: a constant, a schedule
        t -> rho_t, Robbins-Monro (t + 10)^-0.55, or the adaptive rate of Ranganath et al. (2013).
    devices : int or None
        svi: split every minibatch across this many devices (None: all visible devices, with
        ``jax.distributed`` those of every process; the batch size must be a multiple of their
        number).
    num_samples, num_warmup, num_chains, thin : int
        Kept draws per chain, warm-up iterations, chains, iterations per kept draw (MCMC).
    jitter : float
        Diagonal jitter of the prior covariance, K + jitter I.
    precision : {"float64", "float32"}
        Floating-point precision (local; the global JAX setting is untouched).
    progress_bar : bool
        Show a progress bar for long MCMC runs.
    random_state : int, RandomState or None
        Seed of the sampler and of the pseudo-input initialisation.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
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
    inducing_points_ : ndarray of shape (num_inducing, n_features)
        FITC, svi: the final pseudo-inputs.
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
        ECM / FITC: log Z of eq. (9) / (10) before and after each ML-II step.
    idata_ : arviz.InferenceData
        Draws of f (and gamma) for MCMC, the point estimate (chain = draw = 1) for ECM / FITC;
        sample_stats with the log joint or the objective; log_likelihood when gamma0 > 0.
    n_iter_ : int
        ECM iterations run, or MCMC iterations per chain (warm-up included).
    """

    def __init__(
        self,
        kernel: str = "rbf",
        inference: str = "ecm",
        *,
        kernel_params: Mapping[str, Any] | None = None,
        learn_kernel: bool | tuple[str, ...] = True,
        kernel_prior_scale: float = 1.0,
        gamma: float = 1.0,
        gamma_prior: tuple[float, float] | None = None,
        gamma0: float | None = None,
        max_iter: int | None = None,
        mlii_every: int = 20,
        mlii_steps: int = 10,
        optimizer: str = "lbfgs",
        learning_rate: float = 0.05,
        tol: float = 1e-10,
        num_inducing: int = 100,
        inducing: str = "kmeans",
        optimize_inducing: bool = True,
        batch_size: int = 100,
        step_size: Any = "robbins_monro",
        devices: int | None = None,
        num_samples: int = 1000,
        num_warmup: int = 500,
        num_chains: int = 4,
        thin: int = 1,
        jitter: float = 1e-6,
        precision: str = "float64",
        progress_bar: bool = True,
        random_state: Any = None,
    ) -> None:
        self.kernel = kernel
        self.inference = inference
        self.kernel_params = kernel_params
        self.learn_kernel = learn_kernel
        self.kernel_prior_scale = kernel_prior_scale
        self.gamma = gamma
        self.gamma_prior = gamma_prior
        self.gamma0 = gamma0
        self.max_iter = max_iter
        self.mlii_every = mlii_every
        self.mlii_steps = mlii_steps
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.tol = tol
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
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _checked_params(self) -> dict[str, Any]:
        inference = check_option("inference", self.inference, tuple(_GP_DEFAULT_GAMMA0))
        p: dict[str, Any] = {
            "inference": inference,
            "kernel": check_option("kernel", self.kernel, _GP_KERNELS),
            "precision": check_option("precision", self.precision, ("float32", "float64")),
            "inducing": check_option("inducing", self.inducing, ("kmeans", "random")),
            "optimizer": check_option("optimizer", self.optimizer, ML2_OPTIMIZERS),
            "gamma": check_scalar_param("gamma", self.gamma, low=0.0, low_inclusive=False),
            "gamma0": check_scalar_param("gamma0", self.gamma0, low=0.0, allow_none=True),
            "max_iter": check_scalar_param("max_iter", self.max_iter, kind="int", low=1, allow_none=True),
            "mlii_every": check_scalar_param("mlii_every", self.mlii_every, kind="int", low=1),
            "batch_size": check_scalar_param("batch_size", self.batch_size, kind="int", low=1),
            "devices": check_scalar_param("devices", self.devices, kind="int", low=1, allow_none=True),
            "mlii_steps": check_scalar_param("mlii_steps", self.mlii_steps, kind="int", low=0),
            "learning_rate": check_scalar_param("learning_rate", self.learning_rate, low=0.0, low_inclusive=False),
            "tol": check_scalar_param("tol", self.tol, low=0.0),
            "num_inducing": check_scalar_param("num_inducing", self.num_inducing, kind="int", low=1),
            "num_samples": check_scalar_param("num_samples", self.num_samples, kind="int", low=1),
            "num_warmup": check_scalar_param("num_warmup", self.num_warmup, kind="int", low=0),
            "num_chains": check_scalar_param("num_chains", self.num_chains, kind="int", low=1),
            "thin": check_scalar_param("thin", self.thin, kind="int", low=1),
            "jitter": check_scalar_param("jitter", self.jitter, low=0.0),
            "kernel_prior_scale": check_scalar_param(
                "kernel_prior_scale", self.kernel_prior_scale, low=0.0, low_inclusive=False
            ),
            "gamma_prior": _check_gamma_prior(self.gamma_prior, needs_mode=inference in ("ecm", "fitc")),
        }
        if p["gamma0"] is None:
            p["gamma0"] = _GP_DEFAULT_GAMMA0[inference]
        if inference in ("vi", "svi") and (p["gamma0"] != 0.0 or p["gamma_prior"] is not None):
            raise InvalidParameterError(
                f"Invalid value for gamma0 / gamma_prior: inference={inference!r} fits the hinge model of "
                "Wenzel et al. (2017) with gamma fixed (gamma0=0, gamma_prior=None)"
            )
        if p["max_iter"] is None and inference != "svi":
            p["max_iter"] = 200
        if not isinstance(self.optimize_inducing, (bool, np.bool_)):
            raise InvalidParameterError(
                f"Invalid value for optimize_inducing: {self.optimize_inducing!r} (must be a bool)"
            )
        return p

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any, *, checkpoint: Any = None, resume: Any = None) -> "GPBSVM":
        """Fit the MAP with ML-II (ECM, FITC) or the posterior at fixed theta (Gibbs, NUTS).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Two or more classes of any label type; K > 2 classes are fitted one-vs-rest.
        checkpoint : path, optional
            ``inference="gibbs"`` or ``"svi"``: folder that receives a checkpoint after every chunk
            of iterations; Ctrl-C, SIGTERM or an error leave it (Gibbs: and the draws so far,
            ``idata.nc``).
        resume : path, optional
            A checkpoint folder of the same fit (same data, parameters and ``random_state``) to
            continue from; on the CPU the result equals an uninterrupted fit.

        Returns
        -------
        self
        """
        if self._fit_multiclass(X, y, checkpoint=checkpoint, resume=resume):
            return self
        params = self._checked_params()
        params["run_io"] = self._run_io(params, checkpoint, resume)
        X, y = self._fit_input(X, y)
        n = X.shape[0]
        for name in ("num_inducing", "batch_size"):
            if params["inference"] in (("fitc", "svi") if name == "num_inducing" else ("svi",)) and params[name] > n:
                raise InvalidParameterError(
                    f"Invalid value for {name}: {params[name]} (must be between 1 and the number of "
                    f"training points N = {n})"
                )
        theta0 = _initial_kernel_params(params["kernel"], self.kernel_params, X)
        free = _free_kernel_fields(theta0, self.learn_kernel)
        fixed = tuple(f for f in free_fields(theta0) if f not in free)
        if params["inference"] in ("gibbs", "nuts") and free and fixed:
            raise InvalidParameterError(
                f"Invalid value for learn_kernel: {self.learn_kernel!r}; the samplers sample every kernel "
                f"parameter ({', '.join(free_fields(theta0))}) or none (True or False)"
            )
        x64 = params["precision"] == "float64"
        self._x64 = x64
        dtype = np.float64 if x64 else np.float32
        with float_precision(x64):
            theta0 = jax.tree.map(lambda a: jnp.asarray(a, dtype), theta0)
            if params["inference"] == "svi":  # the data stay on the host
                self._fit_svi(X, y, theta0, fixed, params)
                return self
            key = self._fit_key()
            Xj, yj = jnp.asarray(X, dtype), jnp.asarray(y, dtype)
            a0, b0 = params["gamma_prior"] or (2.0, 1.0)
            hyper = GPHyper(*(jnp.asarray(v, dtype) for v in (params["gamma"], a0, b0, params["gamma0"])))
            if params["inference"] != "fitc":
                self._check_kernel_matrix(Xj, theta0, params)
            fit = {"ecm": self._fit_ecm, "fitc": self._fit_fitc, "gibbs": self._fit_gibbs, "nuts": self._fit_nuts,
                   "vi": self._fit_vi}
            posterior, stats = fit[params["inference"]](key, Xj, yj, theta0, fixed, hyper, params)
        self._X_fit = X
        self._y_fit = y
        self._store(posterior, stats, y, params)
        return self

    def _fit_vi(self, key, X, y, theta0, fixed, hyper, params):
        """B-BSVM (Wenzel et al. 2017, Sec. 4.1) at the initial kernel parameters."""
        K = prior_covariance(X, params["kernel"], theta0, params["jitter"])
        res = self._solve(_svi.batch_vi, K, y, hyper.gamma, tol=params["tol"], max_iter=params["max_iter"])
        elbo = np.asarray(res.lower_bound[: int(res.n_iter)], dtype=np.float64)
        if not np.all(np.isfinite(elbo)) or not np.all(np.isfinite(np.asarray(res.state.mu))):
            raise NonFiniteStateError(
                f"Batch VI produced a non-finite ELBO at kernel_params = {params_dict(theta0)}; check the data "
                "scale and the kernel parameters (or use float64)."
            )
        self.elbo_ = elbo
        self.n_iter_ = int(res.n_iter)
        self._theta = theta0
        sw, LB = _svi.batch_vi_factor(K, res.state.alpha, hyper.gamma)
        self._point = {"theta": theta0, "sw": sw, "LB": LB}
        self.alpha_ = np.asarray(cho_solve((cholesky_or_raise(K)[0], True), res.state.mu), dtype=np.float64)
        posterior = {"f": np.asarray(res.state.mu, dtype=np.float64)[None, None]}
        posterior.update({k: np.asarray(v, dtype=np.float64)[None, None] for k, v in params_dict(theta0).items()
                          if k != "degree"})
        return posterior, {"elbo": elbo[None, None, :]}

    def _fit_svi(self, X, y, theta0, fixed, params):
        """S-BSVM (Wenzel et al. 2017, Alg. 1) with ML-II every ``mlii_every`` steps (eq. 12)."""
        n = X.shape[0]
        num_steps = params["max_iter"] or int(np.clip(20 * n // params["batch_size"], 1000, 100_000))
        seed = self._fit_seed()
        Z0 = init_inducing(X, params["num_inducing"], params["inducing"], seed)
        learn = tuple(f for f in free_fields(theta0) if f not in fixed)
        if self.optimize_inducing:
            learn += ("inducing",)
        dtype = np.float64 if self._x64 else np.float32
        res, problem = self._solve(
            _svi.svi_gp, X, y, theta0, Z0, seed, kernel=params["kernel"], learn=learn, num_steps=num_steps,
            batch_size=params["batch_size"], step_size=self.step_size, hyper_every=params["mlii_every"],
            learning_rate=params["learning_rate"], gamma=params["gamma"], jitter=params["jitter"], dtype=dtype,
            devices=params["devices"], progress=self.progress_bar and num_steps >= 100_000, **params["run_io"],
        )
        state = res.state
        if not res.elbo.size:
            raise NonFiniteStateError(
                f"SVI produced a non-finite ELBO in its first {params['mlii_every']} steps at kernel_params = "
                f"{params_dict(theta0)}; lower step_size, check the data scale (or use float64)."
            )
        self._svi = (state, problem)
        theta, Z, mean_u, cov_u = _svi.inducing_posterior(state, problem.features.spec)
        self.variational_mean_ = np.asarray(mean_u, dtype=np.float64)
        self.variational_cov_ = np.asarray(cov_u, dtype=np.float64)
        self.inducing_points_ = np.asarray(Z, dtype=np.float64)
        self.kernel_params_ = params_dict(theta)
        self.gamma_ = params["gamma"]
        self.elbo_, self.elbo_steps_ = res.elbo, res.steps
        self.n_iter_ = int(state.step)
        for attr in ("f_", "alpha_", "support_", "support_vectors_", "dual_coef_", "objective_", "log_z_"):
            if hasattr(self, attr):
                delattr(self, attr)
        posterior = {"u": self.variational_mean_[None, None]}
        posterior.update({k: np.asarray(v, dtype=np.float64)[None, None] for k, v in self.kernel_params_.items()
                          if k != "degree"})
        names = getattr(self, "feature_names_in_", None)
        self.idata_ = to_inference_data(
            posterior, sample_stats={"elbo": res.elbo[None, None, :]},
            coords={"inducing": np.arange(Z.shape[0]),
                    "feature": list(names) if names is not None else [f"x{j}" for j in range(X.shape[1])]},
            dims={"u": ["inducing"], "lengthscales": ["feature"], "elbo": ["svi_round"]},
            attrs={"model": "gp", "kernel": params["kernel"], "inference": "svi",
                   "bayes_maxmargin_version": __version__},
        )

    def _check_kernel_matrix(self, X, theta, params) -> None:
        """Factorise K + jitter I once on the host; raise a clear error if it stays singular."""
        K = prior_covariance(X, params["kernel"], theta, params["jitter"])
        try:
            cholesky_or_raise(K)
        except CholeskyError as err:
            raise ValueError(
                f"The {params['kernel']!r} kernel matrix of the training inputs at kernel_params = "
                f"{params_dict(theta)} is not positive definite even after jitter ({err}); increase "
                f"jitter (now {params['jitter']}), check the kernel parameters, or use float64."
            ) from None

    def _fit_ecm(self, key, X, y, theta0, fixed, hyper, params):
        estimate_gamma = params["gamma_prior"] is not None
        tol = jnp.asarray(params["tol"], X.dtype)
        if len(fixed) == len(free_fields(theta0)) or params["mlii_steps"] == 0:
            data = gp_data(prior_covariance(X, params["kernel"], theta0, params["jitter"]), y)
            res = self._solve(gp_ecm, jnp.zeros_like(y), data, hyper, tol, max_iter=params["max_iter"],
                         estimate_gamma=estimate_gamma)
            objective, log_z, theta = res.objective[None], np.zeros((0, 2)), theta0
        else:
            res = self._solve(
                gp_ecm_mlii,
                X, y, theta0, hyper, tol, kernel=params["kernel"], max_iter=params["max_iter"],
                mlii_every=params["mlii_every"], mlii_steps=params["mlii_steps"],
                optimizer=params["optimizer"], learning_rate=params["learning_rate"],
                estimate_gamma=estimate_gamma, jitter=params["jitter"], fixed=fixed,
            )
            objective, log_z, theta = res.objective, res.log_z, res.params
        self._point = {"inv_lam": res.inv_lam, "gamma": res.gamma, "theta": theta}
        self.alpha_ = np.asarray(gp_alpha(gp_data(prior_covariance(X, params["kernel"], theta, params["jitter"]), y),
                                          res.inv_lam, res.gamma), dtype=np.float64)
        return self._point_estimate(res.f, res.gamma, theta, objective, log_z, estimate_gamma)

    def _fit_fitc(self, key, X, y, theta0, fixed, hyper, params):
        estimate_gamma = params["gamma_prior"] is not None
        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
        V0 = init_inducing(np.asarray(X), params["num_inducing"], params["inducing"], seed)
        learns = len(fixed) < len(free_fields(theta0)) or self.optimize_inducing
        res = self._solve(
            fitc_ecm,
            X, y, jnp.asarray(V0, X.dtype), theta0, hyper, jnp.asarray(params["tol"], X.dtype),
            kernel=params["kernel"], max_iter=params["max_iter"],
            mlii_every=params["mlii_every"] if learns else 0, mlii_steps=params["mlii_steps"],
            optimizer=params["optimizer"], learning_rate=params["learning_rate"], estimate_gamma=estimate_gamma,
            optimize_inducing=bool(self.optimize_inducing), jitter=params["jitter"], fixed=fixed,
        )
        self._point = {"inv_lam": res.inv_lam, "gamma": res.gamma, "theta": res.params, "V": res.V}
        self.inducing_points_ = np.asarray(res.V, dtype=np.float64)
        fac = fitc_factors(res.params, X, res.V, y, params["kernel"], params["jitter"])
        self.alpha_ = np.asarray(fitc_alpha(fac, res.inv_lam, res.gamma), dtype=np.float64)
        return self._point_estimate(res.f, res.gamma, res.params, res.objective, res.log_z, estimate_gamma)

    def _point_estimate(self, f, gamma, theta, objective, log_z, estimate_gamma):
        objective = np.asarray(objective, dtype=np.float64)
        finite = objective[np.isfinite(objective)]
        if not np.all(np.isfinite(np.asarray(f))) or finite.size < np.count_nonzero(~np.isnan(objective)):
            raise NonFiniteStateError(
                f"ECM produced a non-finite latent function or objective at kernel_params = "
                f"{params_dict(theta)}, gamma = {float(gamma):.4g}; check the data scale, the kernel "
                "parameters and the jitter (or use float64)."
            )
        self.objective_ = finite
        self.log_z_ = np.asarray(log_z, dtype=np.float64)
        self.n_iter_ = int(finite.size - objective.shape[0])  # one start value per ECM run
        self._theta = theta
        posterior = {"f": np.asarray(f, dtype=np.float64)[None, None]}
        if estimate_gamma:
            posterior["gamma"] = np.asarray(gamma, dtype=np.float64)[None, None]
        posterior.update({k: np.asarray(v, dtype=np.float64)[None, None] for k, v in params_dict(theta).items()
                          if k != "degree"})
        stats = {"log_joint": finite[None, None, -1:].reshape(1, 1), "objective": finite[None, None, :]}
        return posterior, stats

    def _fit_gibbs(self, key, X, y, theta0, fixed, hyper, params):
        sample_gamma = params["gamma_prior"] is not None
        k_init, k_run = jax.random.split(key)
        f0 = 0.1 * _chain_normals(k_init, params["num_chains"], (X.shape[0],), X.dtype)
        if fixed or not free_fields(theta0):  # theta fixed: eq. (7) at theta0
            data = gp_data(prior_covariance(X, params["kernel"], theta0, params["jitter"]), y)
            state = jax.vmap(init_gp, in_axes=(0, None, None, None))(f0, data, hyper, sample_gamma)
            kernel, record = build_gp_kernel(sample_gamma), record_gp
        else:  # theta sampled too (slice steps on log theta given lambda, gamma)
            data = gp_theta_data(X, y, kernel_prior(theta0, params["kernel_prior_scale"]), params["jitter"])
            state = jax.vmap(lambda f: init_gp_theta(f, theta0, data, hyper, kernel=params["kernel"],
                                                     sample_gamma=sample_gamma))(f0)
            kernel = build_gp_theta_kernel(params["kernel"], theta0, sample_gamma)
            record = build_gp_theta_record(theta0)
        result = self._solve(
            run_chains, kernel, record, state, k_run, data, hyper,
            num_warmup=params["num_warmup"], num_samples=params["num_samples"], thin=params["thin"],
            progress_bar=self.progress_bar, **params["run_io"],
        )
        self.n_iter_ = result.num_iterations
        s = result.samples
        return self._draws(s, sample_gamma, theta0, {"log_joint": s["log_joint"]})

    def _fit_nuts(self, key, X, y, theta0, fixed, hyper, params):
        sample_theta = not fixed and bool(free_fields(theta0))
        prior = kernel_prior(theta0, params["kernel_prior_scale"]) if sample_theta else None
        samples, stats = self._nuts(
            gp_bsvm, key, (X, y),
            {"kernel": params["kernel"], "kernel_params": theta0, "gamma": params["gamma"],
             "gamma_prior": params["gamma_prior"], "gamma0": params["gamma0"], "jitter": params["jitter"],
             "kernel_prior": prior, "noncentered": sample_theta},
            params,
        )
        self.n_iter_ = params["num_warmup"] + params["num_samples"] * params["thin"]
        return self._draws(samples, "gamma" in samples, theta0, stats)

    def _draws(self, samples, sample_gamma, theta, stats):
        """Posterior draws for idata_, and what prediction needs: the draws of f and, when theta
        was sampled, its draws (at most ``_PREDICT_THETA_DRAWS`` of them, evenly spaced)."""
        f = np.asarray(samples["f"], dtype=np.float64)
        self._f_draws = f.reshape(-1, f.shape[-1])
        posterior = {"f": f}
        if sample_gamma:
            posterior["gamma"] = np.asarray(samples["gamma"], dtype=np.float64)
        sampled = [name for name in free_fields(theta) if name in samples]
        self._theta_draws = None
        if sampled:
            draws = {k: np.asarray(samples[k], dtype=np.float64) for k in sampled}
            posterior.update(draws)
            keep = np.unique(np.linspace(0, self._f_draws.shape[0] - 1, _PREDICT_THETA_DRAWS).astype(int))
            self._f_draws = self._f_draws[keep]
            self._theta_draws = theta._replace(
                **{k: v.reshape((-1,) + v.shape[2:])[keep] for k, v in draws.items()}
            )
            theta = theta._replace(**{k: v.reshape((-1,) + v.shape[2:]).mean(axis=0) for k, v in draws.items()})
        self._theta = theta
        return posterior, stats

    def _store(self, posterior, stats, y, params) -> None:
        f = posterior["f"]
        self.f_ = f.reshape(-1, f.shape[-1]).mean(axis=0)
        self.gamma_ = float(posterior["gamma"].mean()) if "gamma" in posterior else params["gamma"]
        self.kernel_params_ = params_dict(self._theta)  # the posterior mean when theta is sampled
        if params["inference"] in ("gibbs", "nuts"):
            with float_precision(self._x64):
                K = prior_covariance(jnp.asarray(self._X_fit), params["kernel"], self._theta, params["jitter"])
                chol, _ = cholesky_or_raise(K)
                self.alpha_ = np.asarray(cho_solve((chol, True), jnp.asarray(self.f_, K.dtype)), dtype=np.float64)
        self.support_ = support_vectors(self.f_, y)
        self.support_vectors_ = self._X_fit[self.support_]
        self.dual_coef_ = self.alpha_[self.support_][None, :]
        log_lik = None
        if params["gamma0"] > 0:
            log_lik = {"y": _pointwise_log_lik(f, posterior.get("gamma"), y, params)}
        d = self.n_features_in_
        names = getattr(self, "feature_names_in_", None)
        features = list(names) if names is not None else [f"x{j}" for j in range(d)]
        self.idata_ = to_inference_data(
            posterior,
            sample_stats=stats,
            observed_data={"y": y},
            log_likelihood=log_lik,
            coords={"obs": np.arange(y.shape[0]), "feature": features},
            dims={"f": ["obs"], "y": ["obs"], "lengthscales": ["feature"], "objective": ["ecm_iteration"]},
            attrs={"model": "gp", "kernel": params["kernel"], "inference": params["inference"],
                   "bayes_maxmargin_version": __version__},
        )

    def _saved_state(self) -> dict[str, Any]:
        state = super()._saved_state()
        if "_svi" in state:  # the compiled problem is rebuilt on load; optimiser states are not needed
            svi_state, problem = state["_svi"]
            like = problem.features.spec.like
            state["_svi"] = (svi_state._replace(nat_opt=None, hyper_opt=None), like)
        return state

    def _restore_saved(self, state: dict[str, Any]) -> None:
        if "_svi" in state:
            svi_state, like = state["_svi"]
            spec = _svi.GPSpec(get_kernel(self.kernel), like, float(self.jitter))
            with float_precision(state["_x64"]):
                problem = _svi.gp_problem(spec, svi_state.whiten.shape[0], svi_state.whiten.dtype, False)
            state["_svi"] = (svi_state, problem)
        super()._restore_saved(state)

    # ------------------------------------------------------------------ prediction
    def _latent_moments(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kernel, jitter = self.kernel, self.jitter
        if self.inference == "svi":
            with float_precision(self._x64):
                mean, var = _svi.predict_moments(*self._svi, X)
            return mean.astype(np.float64), var.astype(np.float64)
        with float_precision(self._x64):
            dtype = jnp.float64 if self._x64 else jnp.float32
            X_train, X = jnp.asarray(self._X_fit, dtype), jnp.asarray(X, dtype)
            y = jnp.asarray(self._y_fit, dtype)
            if self.inference == "ecm":
                p = self._point
                mean, var = gp_predict(X_train, X, y, p["inv_lam"], p["gamma"], p["theta"], kernel=kernel, jitter=jitter)
            elif self.inference == "vi":  # K^-1 mu and K - K W^1/2 B^-1 W^1/2 K at the test inputs
                p = self._point
                kfn = get_kernel(kernel)
                Ks = kfn(p["theta"], X_train, X)
                half = jax.scipy.linalg.solve_triangular(p["LB"], p["sw"][:, None] * Ks, lower=True)
                mean = Ks.T @ jnp.asarray(self.alpha_, dtype)
                var = kernel_diag(kfn, p["theta"], X) - jnp.sum(half**2, axis=0)
            elif self.inference == "fitc":
                p = self._point
                mean, var = fitc_predict(X_train, X, y, p["V"], p["inv_lam"], p["gamma"], p["theta"],
                                         kernel=kernel, jitter=jitter)
            elif self._theta_draws is not None:
                theta = jax.tree.map(lambda a: jnp.asarray(a, dtype), self._theta_draws)
                mean, var = gp_predict_from_theta_draws(
                    X_train, X, jnp.asarray(self._f_draws, dtype), theta, kernel=kernel, jitter=jitter
                )
            else:
                mean, mean_sq, cond_var = gp_predict_from_draws(
                    X_train, X, jnp.asarray(self._f_draws, dtype), self._theta, kernel=kernel, jitter=jitter
                )
                var = cond_var + jnp.maximum(mean_sq - mean**2, 0.0)
        return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
