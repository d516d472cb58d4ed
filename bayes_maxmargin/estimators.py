"""scikit-learn compatible Bayesian SVM classifiers (the user-facing API)."""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import __version__
from .augmentation import log_pseudo_likelihood
from .data.validation import (
    BinaryLabelEncoder,
    check_array_2d,
    check_n_features,
    check_option,
    check_scalar_param,
    check_X_y,
)
from .diagnostics import to_inference_data
from .inference.driver import NonFiniteStateError, run_chains
from .inference.em import linear_em
from .inference.gibbs import LinearData, build_linear_kernel, init_linear, record_linear
from .inference.nuts import run_nuts
from .models.linear import LinearHyper, linear_bsvm, prior_precision
from .predict import gaussian_latent_moments, latent_moments_from_draws, probit_margin, probit_predictive

__all__ = ["LinearBSVM"]


class _BayesianSVMClassifier(ClassifierMixin, BaseEstimator):
    """Shared behaviour: input validation, label coding, probit predictions, tags.

    Subclasses implement ``fit`` and ``_latent_moments(X) -> (mean, var)`` of the latent f.
    """

    def _fit_input(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        name = type(self).__name__
        if y is None:
            raise ValueError(f"{name} requires y to be passed, but the target y is None.")
        if hasattr(X, "columns"):
            self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        X, y = check_X_y(X, y, estimator_name=name)
        self._encoder = BinaryLabelEncoder().fit(y)
        self.classes_ = self._encoder.classes_
        self.n_features_in_ = X.shape[1]
        return X, self._encoder.transform(y)

    def _predict_input(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "classes_")
        name = type(self).__name__
        X = check_array_2d(X, estimator_name=name)
        check_n_features(X, self.n_features_in_, name)
        return X

    def predict_latent(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean and variance of the latent function f at ``X``."""
        return self._latent_moments(self._predict_input(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """Probit-scale margin m / sqrt(1 + v) of the posterior predictive of f.

        Positive values predict ``classes_[1]``. Its sign is the sign of the posterior mean of f
        (the SVM decision rule), and ``predict_proba[:, 1] = Phi(decision_function)``, so scores and
        probabilities rank points identically. ``predict_latent`` gives m and v themselves.
        """
        return probit_margin(*self.predict_latent(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior predictive class probabilities Phi(m / sqrt(1 + v)), columns as ``classes_``."""
        p = probit_predictive(*self.predict_latent(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        """Class labels: ``classes_[1]`` where the posterior mean of f is positive."""
        signs = np.where(self.decision_function(X) > 0, 1.0, -1.0)
        return self._encoder.inverse_transform(signs)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.non_deterministic = False
        return tags


def _pointwise_log_lik(design, coef_draws, gamma_draws, y, params) -> np.ndarray:
    """Skewed Laplace log density of u = 1 - y f per draw and observation (gamma0 > 0 only)."""
    f = np.einsum("np,cdp->cdn", design, coef_draws)
    gamma = params["gamma"] if gamma_draws is None else gamma_draws[..., None]
    with jax.enable_x64(True):
        return np.asarray(log_pseudo_likelihood(jnp.asarray(1.0 - y * f), gamma, params["gamma0"]))


def _random_key(random_state: Any) -> jax.Array:
    seed = int(check_random_state(random_state).randint(0, 2**31 - 1))
    return jax.random.PRNGKey(seed)


class LinearBSVM(_BayesianSVMClassifier):
    """Linear Bayesian SVM (Polson & Scott 2011; skewed Laplace of Henao et al. 2014, eq. 4-6).

    f(x) = x' beta + b with beta ~ N(0, sigma^2 I), b ~ N(0, intercept_scale^2) (flat if None), and
    the hinge pseudo-likelihood exp(-2 gamma max(1 - y f, 0)) (``gamma0 = 0``) or the skewed
    Laplace (``gamma0 > 0``). The EM solution with a flat intercept prior is the SVM with
    C = 2 gamma sigma^2.

    Parameters
    ----------
    inference : {"gibbs", "em", "nuts"}
        Conjugate Gibbs sampler, EM / ECM for the MAP, or NUTS on the marginal program.
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
        Maximum EM iterations.
    tol : float
        EM stops when the relative increase of the log posterior is below ``tol``.
    precision : {"float64", "float32"}
        Floating-point precision of the computation (local; the global JAX setting is untouched).
    progress_bar : bool
        Show a progress bar for MCMC runs predicted to take more than a few seconds.
    random_state : int, RandomState or None
        Seed of the sampler.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_ : ndarray of shape (1, n_features)
        Posterior mean (MCMC) or MAP (EM) of beta.
    intercept_ : ndarray of shape (1,)
    gamma_ : float
        Posterior mean, MAP or fixed value of gamma.
    idata_ : arviz.InferenceData
        Posterior draws (MAP with chain = draw = 1 for EM), sample_stats with the log joint (and the
        EM objective trace), observed_data, and log_likelihood when ``gamma0 > 0``.
    n_iter_ : int
        EM iterations run, or MCMC iterations per chain (warm-up included).
    objective_ : ndarray
        Log posterior after every EM iteration (EM only).
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
        precision: str = "float64",
        progress_bar: bool = True,
        random_state: Any = None,
    ) -> None:
        self.inference = inference
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
        self.precision = precision
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _checked_params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "inference": check_option("inference", self.inference, ("em", "gibbs", "nuts")),
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
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"Invalid value for fit_intercept: {self.fit_intercept!r} (must be a bool)")
        prior = self.gamma_prior
        if prior is not None:
            if isinstance(prior, str) or len(prior) != 2:
                raise ValueError(
                    f"Invalid value for gamma_prior: {prior!r} (must be None or a pair (a0, b0) "
                    "of the Gamma prior's shape and rate)"
                )
            a0 = check_scalar_param("gamma_prior[0] (a0)", prior[0], low=0.0, low_inclusive=False)
            b0 = check_scalar_param("gamma_prior[1] (b0)", prior[1], low=0.0, low_inclusive=False)
            if p["inference"] == "em" and a0 <= 1.0:
                raise ValueError(
                    f"Invalid value for gamma_prior[0] (a0): {a0} (EM needs a0 > 1 so that the "
                    "posterior of gamma has a mode)"
                )
            prior = (a0, b0)
        p["gamma_prior"] = prior
        return p

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any) -> "LinearBSVM":
        """Fit the posterior (Gibbs, NUTS) or the MAP (EM) of the linear Bayesian SVM.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), two classes of any label type

        Returns
        -------
        self
        """
        params = self._checked_params()
        X, y = self._fit_input(X, y)
        x64 = params["precision"] == "float64"
        dtype = np.float64 if x64 else np.float32
        design = np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X
        with jax.enable_x64(x64):
            data = LinearData(jnp.asarray(design, dtype), jnp.asarray(y, dtype))
            a0, b0 = params["gamma_prior"] or (1.0, 1.0)
            hyper = LinearHyper(
                jnp.asarray(
                    prior_precision(X.shape[1], params["sigma"], params["intercept_scale"], self.fit_intercept),
                    dtype,
                ),
                *(jnp.asarray(v, dtype) for v in (params["gamma"], a0, b0, params["gamma0"])),
            )
            key = _random_key(self.random_state)
            fit = {"gibbs": self._fit_gibbs, "em": self._fit_em, "nuts": self._fit_nuts}
            coef_draws, gamma_draws, stats = fit[params["inference"]](key, data, hyper, params)
        self._store(design, coef_draws, gamma_draws, stats, y, params)
        return self

    def _fit_gibbs(self, key, data, hyper, params):
        sample_gamma = params["gamma_prior"] is not None
        k_init, k_run = jax.random.split(key)
        n_chains, p = params["num_chains"], data.design.shape[1]
        coef0 = 0.5 * jax.random.normal(k_init, (n_chains, p), data.design.dtype)
        state = jax.vmap(init_linear, in_axes=(0, None, None, None))(coef0, data, hyper, sample_gamma)
        result = run_chains(
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
        )
        self.n_iter_ = result.num_iterations
        s = result.samples
        return s["coef"], s["gamma"] if sample_gamma else None, {"log_joint": s["log_joint"]}

    def _fit_em(self, key, data, hyper, params):
        estimate_gamma = params["gamma_prior"] is not None
        coef0 = jnp.zeros(data.design.shape[1], data.design.dtype)
        res = linear_em(
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
        samples, stats = run_nuts(
            linear_bsvm,
            key,
            (X, data.y),
            self._model_kwargs(params),
            num_warmup=params["num_warmup"],
            num_samples=params["num_samples"],
            num_chains=params["num_chains"],
            thin=params["thin"],
            progress_bar=False,
        )
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
            log_lik = {"y": _pointwise_log_lik(design, coef_draws, posterior.get("gamma"), y, params)}
        self.idata_ = to_inference_data(
            posterior,
            sample_stats=stats,
            observed_data={"y": y},
            log_likelihood=log_lik,
            coords={"feature": features, "obs": np.arange(y.shape[0])},
            dims={"beta": ["feature"], "y": ["obs"], "objective": ["em_iteration"]},
            attrs={"model": "linear", "inference": params["inference"], "bayes_maxmargin_version": __version__},
        )

    # ------------------------------------------------------------------ prediction
    def _design(self, X: np.ndarray) -> np.ndarray:
        return np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X

    def _latent_moments(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        design = self._design(X)
        if self.inference == "em":
            return gaussian_latent_moments(design, self._coef_mean, self._prec_chol)
        return latent_moments_from_draws(design, self._coef_draws)
