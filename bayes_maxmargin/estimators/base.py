"""scikit-learn compatible Bayesian SVM classifiers (the user-facing API)."""

from __future__ import annotations

from functools import partial, wraps
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

import bayes_maxmargin.estimators.multiclass as _mc
from bayes_maxmargin.core.augmentation import log_pseudo_likelihood
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.linalg import float_precision, limit_blas_threads
from bayes_maxmargin.core.predict import probit_margin, probit_predictive
from bayes_maxmargin.core.progress import fit_progress
from bayes_maxmargin.data.labels import BinaryLabelEncoder, OneVsRestLabelEncoder, n_classes_of
from bayes_maxmargin.core.checks import InvalidParameterError, check_option, check_scalar_param
from bayes_maxmargin.data.validation import (
    check_array_2d,
    check_finite_output,
    check_magnitude,
    check_n_features,
    check_X_y,
)
from bayes_maxmargin.diagnostics import to_inference_data, warn_if_not_mixed
from bayes_maxmargin.engine.checkpoint import checkpoint_folder
from bayes_maxmargin.engine.mcmc import fold_in_chains
from bayes_maxmargin.engine.nuts import check_divergences, nuts_chains, to_host
from bayes_maxmargin.engine.resumable import run_resumable
from bayes_maxmargin.estimators.registry import Method, Registry

if TYPE_CHECKING:
    import xarray as xr

__all__ = []

#: Attributes that a caller, not ``fit``, sets on an estimator: scikit-learn's callback protocol
#: (a meta-estimator such as ``Pipeline`` sets ``_parent_callback_ctx`` before calling ``fit`` and
#: deletes it afterwards; ``set_callbacks``), metadata routing requests (``set_fit_request``) and the
#: one-vs-rest recorder. A refit keeps them; they are not part of the fitted state.
_CALLER_ATTRIBUTES = frozenset({
    "_parent_callback_ctx", "_callback_fit_ctx", "_skl_callbacks", "_skl_callbacks_to_teardown",
    "_metadata_request", "_ovr_recorder",
})


#: Instance attribute holding the draws a fit's mixing is judged on until the fit returns.
_MIXING_PENDING = "_mixing_pending"


def reports_progress(fit: Any) -> Any:
    """Run ``fit`` inside a progress reporter (:func:`~bayes_maxmargin.core.progress.fit_progress`)
    when the estimator's ``progress_bar`` is on: "compiling", then the iterations of whichever
    inference method runs. The one-vs-rest sub-fits report to their multi-class fit's reporter. An
    estimator class whose fits factorise many small matrices sets ``_FIT_BLAS_THREADS`` (OpenBLAS threads
    during the fit, :func:`~bayes_maxmargin.core.linalg.limit_blas_threads`; unset: as in the process)."""

    @wraps(fit)
    def fit_reporting(self: Any, *args: Any, **kwargs: Any) -> Any:
        enabled = bool(getattr(self, "progress_bar", False)) and "_ovr_recorder" not in self.__dict__
        inference = getattr(self, "inference", "")
        with (fit_progress(enabled, f"{type(self).__name__}({'default' if inference is None else inference})"),
              limit_blas_threads(getattr(self, "_FIT_BLAS_THREADS", None))):
            fitted = fit(self, *args, **kwargs)
        pending = self.__dict__.pop(_MIXING_PENDING, None)
        if pending is not None:  # once per fit, below the closed bar
            warn_if_not_mixed(pending[0], type(self).__name__, separable=pending[1])
        return fitted

    return fit_reporting


def check_mixing_after_fit(estimator: Any, draws: xr.DataTree, separable: Any = None) -> None:
    """Have ``estimator``'s :func:`reports_progress` fit judge ``draws`` once it returns and its progress
    bar is closed (:func:`~bayes_maxmargin.diagnostics.warn_if_not_mixed`; ``separable``: its training
    classes are linearly separable, True or the one-vs-rest labels)."""
    estimator.__dict__[_MIXING_PENDING] = (draws, separable)


class _BayesianSVMClassifier(ClassifierMixin, BaseEstimator):
    """Shared behaviour: input validation, label coding, probit predictions, tags, and the
    one-vs-rest multi-class fit of :mod:`bayes_maxmargin.estimators.multiclass`.

    Subclasses implement ``fit`` (calling :meth:`_fit_multiclass` first, and routing their solver
    calls through :meth:`_solve` and their keys through :meth:`_fit_key`) and
    ``_latent_moments(X) -> (mean, var)`` of the latent f.
    """

    def __getstate__(self) -> dict[str, Any]:
        """The state that ``pickle`` (and ``copy.deepcopy``, joblib) keeps, with the fit's JAX arrays as
        NumPy arrays: JAX rebuilds an unpickled array at the precision of the moment (float32 unless
        64-bit mode is on), which would turn a float64 fit into a float32 one; NumPy keeps the dtype,
        and every prediction converts at the fit's precision (as for a loaded ``.bmm`` file)."""
        def host(leaf: Any) -> Any:
            if isinstance(leaf, jax.Array) and not jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                return np.asarray(leaf)
            return leaf

        return jax.tree.map(host, super().__getstate__())

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
        columns = list(X.columns) if hasattr(X, "columns") else None
        X, y = check_X_y(X, y, allow_nan=allow_nan, estimator_name=name, nan_hint=nan_hint)
        check_magnitude(X, dtype=self._compute_dtype(), n_terms=X.size, columns=columns, estimator_name=name)
        self._encoder = BinaryLabelEncoder().fit(y)
        self.classes_ = self._encoder.classes_
        self.n_features_in_ = X.shape[1]
        return X, self._encoder.transform(y)

    def _fit_key(self) -> jax.Array:
        """The PRNG key of this fit: ``random_state`` itself when it is a JAX key (the binary problem k of
        a one-vs-rest fit has ``fold_in(key, k)``), else ``PRNGKey`` of a seed drawn from it."""
        key = _as_key(self.random_state)
        return _random_key(self.random_state) if key is None else key

    def _fit_seed(self) -> int:
        """An integer seed (for host-side generators) drawn like :meth:`_fit_key`."""
        key = _as_key(self.random_state)
        return _random_seed(self.random_state) if key is None else int(_key_seed(key))

    def _solve(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``; batched over the classes in a one-vs-rest fit
        (:func:`bayes_maxmargin.estimators.multiclass.solve`)."""
        return _mc.solve(self, fn, *args, **kwargs)

    def _nuts(self, model, key, model_args, model_kwargs, *, num_warmup: int, num_samples: int, num_chains: int,
              thin: int, run_io: dict[str, Any]):
        """NUTS draws of ``model`` (:func:`~bayes_maxmargin.engine.nuts.nuts_chains`, one
        vmapped program over the classes of a one-vs-rest fit; in chunks with a checkpoint folder in
        ``run_io``) as host arrays and statistics."""
        run = {"num_warmup": num_warmup, "num_samples": num_samples, "num_chains": num_chains, "thin": thin}
        if checkpoint_folder(run_io.get("checkpoint"), run_io.get("resume")) is None:
            draws = self._solve(nuts_chains, model, key, model_args, model_kwargs, **run)
        else:
            draws = nuts_chains(model, key, model_args, model_kwargs, **run, **run_io)
        samples, stats = to_host(*draws)
        self.num_divergences_, self.divergence_fraction_ = check_divergences(stats["diverging"], type(self).__name__)
        return samples, stats

    def _fit_multiclass(self, X: Any, y: Any, **fit_kwargs: Any) -> bool:
        """Fit a y of K > 2 classes one-vs-rest (:mod:`bayes_maxmargin.estimators.multiclass`) and return
        True; return False (doing nothing) for any other y, which the binary fit then handles."""
        if "_ovr_recorder" in self.__dict__ or y is None or n_classes_of(y) <= 2:
            return False
        name = type(self).__name__
        _, y_checked = check_X_y(X, y, allow_nan=True, estimator_name=name)
        for attr in self._fitted_state():
            delattr(self, attr)
        encoder = OneVsRestLabelEncoder(name).fit(y_checked)
        codes = encoder.transform(y_checked)
        key = self._fit_key()
        subs = [clone(self).set_params(random_state=_raw_key(jax.random.fold_in(key, k))) for k in range(codes.shape[0])]
        _mc.fit_one_vs_rest(subs, lambda k: subs[k].fit(X, codes[k], **fit_kwargs))
        self._encoder = encoder
        self.classes_ = encoder.classes_
        self.n_features_in_ = subs[0].n_features_in_
        if hasattr(subs[0], "feature_names_in_"):
            self.feature_names_in_ = subs[0].feature_names_in_
        self.estimators_ = subs
        draws = [s.__dict__.pop("_mixing_draws", None) for s in subs]
        separable = [c for c, s in zip(self.classes_, subs) if s.__dict__.pop("_separable", False)]
        self.__dict__.update(_mc.combine_attributes(subs))
        if all(hasattr(s, "idata_") for s in subs):
            self.idata_ = _mc.combine_draws([s.idata_ for s in subs], self.classes_)
        self._separable = separable
        self._check_mixing(_mc.combine_draws(draws, self.classes_) if all(d is not None for d in draws) else None)
        return True

    def _defer_idata(self, **parts: Any) -> None:
        """Set ``idata_`` to ``to_inference_data(**parts)`` when it is first read (building it costs
        more than a small S-BSVM fit's compiled steps); a saved file holds it built."""
        self.__dict__.pop("idata_", None)
        self._idata_parts = parts

    def __getattr__(self, name: str) -> Any:
        parts = self.__dict__.get("_idata_parts") if name == "idata_" else None
        if parts is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.idata_ = self._idata_from(dict(parts))
        del self._idata_parts
        return self.idata_

    def _idata_from(self, parts: dict[str, Any]) -> xr.DataTree:
        """``idata_`` from the parts :meth:`_defer_idata` kept."""
        return to_inference_data(**parts)

    def _check_mixing(self, draws: xr.DataTree | None = None) -> None:
        """Warn (:class:`~bayes_maxmargin.diagnostics.MixingWarning`), when the fit returns
        (:func:`check_mixing_after_fit`), if the chains of this MCMC fit have not mixed, judged on ``draws``
        (default: the posterior, ``idata_``); a one-vs-rest
        sub-fit keeps its ``draws`` for the multi-class fit, which checks all classes once. A fit that
        found its training classes linearly separable (``_separable``: True, or the one-vs-rest labels)
        warns that they are (:class:`~bayes_maxmargin.diagnostics.SeparableClassesWarning`) instead."""
        if "_ovr_recorder" in self.__dict__:
            if draws is not None:
                self._mixing_draws = draws
        elif hasattr(self, "idata_"):
            separable = self.__dict__.pop("_separable", None)
            check_mixing_after_fit(self, self.idata_ if draws is None else draws, separable)

    @property
    def _multiclass(self) -> bool:
        return "estimators_" in self.__dict__

    # ------------------------------------------------------------------ prediction
    def _predict_input(self, X: Any, allow_nan: bool = False) -> np.ndarray:
        check_is_fitted(self, "classes_")
        name = type(self).__name__
        columns = list(X.columns) if hasattr(X, "columns") else None
        X = check_array_2d(X, allow_nan=allow_nan, estimator_name=name)
        check_n_features(X, self.n_features_in_, name)
        check_magnitude(X, dtype=self._compute_dtype(), n_terms=X.shape[1], columns=columns, estimator_name=name)
        return X

    def _compute_dtype(self) -> np.dtype:
        """The floating dtype of the fit (``precision``), which bounds the input magnitudes
        (:func:`~bayes_maxmargin.data.validation.magnitude_limit`); an invalid ``precision`` is named here,
        before any input is checked against it."""
        return np.dtype(self._precision())

    def _precision(self) -> str:
        """The checked ``precision`` of the fit."""
        return check_option("precision", getattr(self, "precision", "float64"), ("float32", "float64"))

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
        moments = self._multiclass_latent(X) if self._multiclass else self._latent_moments(X)
        check_finite_output(moments, "predictive mean or variance of f")
        return moments

    def decision_function(self, X: Any) -> np.ndarray:
        """Probit-scale margin m / sqrt(1 + v) of the posterior predictive of f.

        Two classes: shape (n_samples,); positive values predict ``classes_[1]``. Its sign is the
        sign of the posterior mean of f (the SVM decision rule), and ``predict_proba[:, 1] =
        Phi(decision_function)``, so scores and probabilities rank points identically. K > 2
        classes: shape (n_samples, n_classes), the margins of the K one-vs-rest problems; the
        prediction is the class of the largest. ``predict_latent`` gives m and v themselves.
        A :class:`~bayes_maxmargin.GPBSVM` with a learnt link (``link_`` = (a, b)) uses a f + b in
        place of f: (a m + b) / sqrt(1 + a^2 v).
        """
        return probit_margin(*self._linked(*self.predict_latent(X)))

    def _linked(self, mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Moments of the argument of the probit link given those of f (the identity here)."""
        return mean, var

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
        probabilities Phi(m_k / sqrt(1 + v_k)) normalised to sum to one over the classes. A
        :class:`~bayes_maxmargin.GPBSVM` with a learnt link (``link_`` = (a, b)) puts a m + b and
        a^2 v in place of m and v.
        """
        return self._probabilities(*self._linked(*self.predict_latent(X)))

    def predict(self, X: Any) -> np.ndarray:
        """Class labels: ``classes_[1]`` where the posterior mean of f is positive (two classes);
        the class of the largest one-vs-rest margin (K > 2 classes)."""
        return self._labels(self.decision_function(X))

    #: The family's inference methods (:class:`~bayes_maxmargin.estimators.registry.Registry`), set by each
    #: family's module after its class.
    _METHODS: Registry

    @classmethod
    def _checkpointed(cls) -> tuple[str, ...]:
        """The inference methods that take ``checkpoint`` / ``resume`` (:attr:`Method.checkpoints`)."""
        return cls._METHODS.names(lambda m: m.checkpoints)

    def _run_io(self, inference: str, checkpoint: Any, resume: Any) -> dict[str, Any]:
        """``checkpoint`` / ``resume`` of :func:`~bayes_maxmargin.engine.mcmc.run_chains`,
        :func:`~bayes_maxmargin.engine.svi.run_svi` and :func:`~bayes_maxmargin.engine.resumable.run_resumable`,
        checked to apply to ``inference`` (:meth:`_checkpointed`). A multi-class
        fit runs its K one-vs-rest problems together with one checkpoint (stacked chains, one minibatch
        loop or :func:`~bayes_maxmargin.engine.resumable.run_resumable_batched`)."""
        if checkpoint is not None or resume is not None:
            applies = self._checkpointed()
            if inference not in applies:
                raise InvalidParameterError(
                    f"checkpoint / resume apply to inference={', '.join(map(repr, applies))}, "
                    f"not inference={inference!r}"
                )
        return {"checkpoint": checkpoint, "resume": resume}

    def _solve_resumable(self, run_io: dict[str, Any], fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` (a compiled solver) as :meth:`_solve`, or, with a checkpoint or resume
        folder in ``run_io`` (:meth:`_run_io`), in chunks with checkpoints
        (:func:`~bayes_maxmargin.engine.resumable.run_resumable`)."""
        if checkpoint_folder(**run_io) is None:
            return self._solve(fn, *args, **kwargs)
        return run_resumable(fn, *args, **run_io, **kwargs)

    def _fitted_state(self) -> dict[str, Any]:
        """The attributes ``fit`` set: everything but the parameters and :data:`_CALLER_ATTRIBUTES`."""
        params = self.get_params(deep=False)
        return {k: v for k, v in vars(self).items() if k not in params and k not in _CALLER_ATTRIBUTES}

    def _saved_state(self) -> dict[str, Any]:
        """Everything ``fit`` set, for :func:`bayes_maxmargin.save`; the one-vs-rest
        sub-estimators as their parameters and saved states (their draws live in ``idata_``)."""
        if "_idata_parts" in self.__dict__:
            self.idata_  # noqa: B018 (builds the deferred idata_: the file holds it)
        state = self._fitted_state()
        if "estimators_" in state:
            state["estimators_"] = [_sub_saved(sub) for sub in state["estimators_"]]
        return state

    def _restore_saved(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`_saved_state`, for :func:`bayes_maxmargin.load`."""
        subs = state.pop("estimators_", None)
        self.__dict__.update(state)
        if subs is not None:
            self.estimators_ = []
            for k, saved in enumerate(subs):
                sub = _sub_restored(type(self), saved)
                if "idata_" in state:
                    sub.idata_ = state["idata_"].isel(**{"class": k})
                self.estimators_.append(sub)

    #: What every binary fit sets besides the label encoder, ``classes_`` and ``n_features_in_``
    #: (:meth:`_check_restored`); each estimator names its own.
    _FITTED: tuple[str, ...] = ()

    def _check_restored(self) -> None:
        """Raise ValueError where the state :func:`bayes_maxmargin.load` rebuilt does not hang together
        (a damaged or edited file): a binary fit that lacks an attribute every fit sets (``_FITTED``) or
        has other than two classes; one-vs-rest estimators that fail these checks, are not binary fits of
        the codes -1 / +1 of the width of this one, were not fitted with the keys of their positions
        (where ``random_state`` fixes them; files of 0.1.0 give every one the same seed), or whose
        attributes, stacked, are not this fit's
        (:func:`~bayes_maxmargin.estimators.multiclass.check_combined`)."""
        subs = self.__dict__.get("estimators_")
        if subs is None:
            missing = [name for name in ("_encoder", "classes_", "n_features_in_", *self._FITTED)
                       if name not in self.__dict__]
            if missing:
                raise ValueError(f"the fit lacks its fitted attribute{'s' * (len(missing) > 1)} {missing}")
            if len(self.classes_) != 2:
                raise ValueError(f"{len(self.classes_)} classes_ on a binary fit")
            return
        key = _as_key(self.random_state) if not isinstance(self.random_state, (int, np.integer)) else (
            _random_key(self.random_state))
        for k, sub in enumerate(subs):
            try:
                sub._check_restored()
                if sub.n_features_in_ != self.n_features_in_:
                    raise ValueError(f"{sub.n_features_in_} features, not {self.n_features_in_}")
                if not np.array_equal(sub.classes_, [-1.0, 1.0]):
                    raise ValueError(f"classes_ {sub.classes_}, not the one-vs-rest codes [-1, 1]")
                if key is not None and _as_key(sub.random_state) is not None and not np.array_equal(
                        np.asarray(sub.random_state), np.asarray(_raw_key(jax.random.fold_in(key, k)))):
                    raise ValueError(f"its random_state is not that of one-vs-rest problem {k} of this fit's "
                                     "random_state (the estimators are not in the order of classes_)")
            except (ValueError, TypeError, AttributeError, IndexError, KeyError) as err:
                raise ValueError(f"estimators_[{k}]: {err}") from None
        _mc.check_combined(self, subs)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


def _sub_saved(sub: _BayesianSVMClassifier) -> dict[str, Any]:
    """A fitted sub-estimator (one-vs-rest problem, second stage) as saved: its parameters and its saved
    state without its draws (a file holds one DataTree, the owner's ``idata_``)."""
    return {"params": sub.get_params(deep=False),
            "state": {k: v for k, v in sub._saved_state().items() if k != "idata_"}}


def _sub_restored(cls: type, saved: dict[str, Any]) -> Any:
    """The sub-estimator of class ``cls`` that :func:`_sub_saved` saved."""
    sub = cls(**saved["params"])
    sub._restore_saved(dict(saved["state"]))
    return sub


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


def _check_gamma0_prior(prior: Any, method: Method) -> tuple[float, float] | None:
    """Validate ``gamma0_prior``: None or a pair (shape, rate) of finite numbers > 0, with a method that
    samples gamma0 (:attr:`~bayes_maxmargin.estimators.registry.Method.samples_gamma0`)."""
    if prior is None:
        return None
    pair = None
    if not isinstance(prior, str) and hasattr(prior, "__len__") and len(prior) == 2:
        try:
            pair = tuple(check_scalar_param(f"gamma0_prior[{i}]", v, low=0.0, low_inclusive=False)
                         for i, v in enumerate(prior))
        except InvalidParameterError:
            pair = None
    if pair is None:
        raise InvalidParameterError(
            f"Invalid value for gamma0_prior: {prior!r} (must be None or a pair (shape, rate) of finite "
            "numbers > 0: the Gamma prior on gamma0)"
        )
    if not method.samples_gamma0:
        raise InvalidParameterError(
            f"Invalid value for gamma0_prior: {prior!r} with inference={method.name!r} (gamma0 is sampled by "
            "inference='gibbs' only; pass gamma0_prior=None to keep gamma0 fixed)"
        )
    return pair


def _gamma0_hyper(gamma0: float, gamma0_prior: tuple[float, float] | None) -> tuple[float, float, float]:
    """gamma0 and the shape and rate of its Gamma prior, as the models' hyperparameters take them
    (``gamma0``, ``gamma0_shape``, ``gamma0_rate``): without ``gamma0_prior`` the fixed gamma0 (the prior
    unused); with it the chains' initial gamma0, ``gamma0`` where it is > 0, else the prior mean."""
    if gamma0_prior is None:
        return gamma0, 1.0, 1.0
    shape, rate = gamma0_prior
    return (gamma0 if gamma0 > 0 else shape / rate), shape, rate


def _pointwise_log_lik(f, gamma_draws, y, gamma, gamma0, gamma0_draws=None) -> np.ndarray:
    """Skewed Laplace log density of u = 1 - y f per draw and observation (gamma0 > 0 only).

    ``f`` has shape (chain, draw, n); ``gamma_draws`` and ``gamma0_draws`` (chain, draw) or None for a
    fixed ``gamma`` / ``gamma0``."""
    gamma = gamma if gamma_draws is None else gamma_draws[..., None]
    gamma0 = gamma0 if gamma0_draws is None else gamma0_draws[..., None]
    with float_precision(True):
        return np.asarray(log_pseudo_likelihood(jnp.asarray(1.0 - y * f), gamma, gamma0))


def _random_seed(random_state: Any) -> int:
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def _as_key(random_state: Any) -> jax.Array | None:
    """``random_state`` as a JAX PRNG key when it is one (a typed key, or the raw uint32 pair of
    ``jax.random.PRNGKey``, as a saved file gives it back), else None."""
    if isinstance(random_state, (jax.Array, np.ndarray)):
        if jax.dtypes.issubdtype(random_state.dtype, jax.dtypes.prng_key):
            return random_state
        if random_state.dtype == np.uint32 and random_state.shape == (2,):
            return jnp.asarray(random_state)
    return None


def _raw_key(key: jax.Array) -> jax.Array:
    """The uint32 data of a key (typed keys cannot be saved; the raw pair draws the same numbers)."""
    return jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else key


def _random_key(random_state: Any) -> jax.Array:
    return _prng_key(_random_seed(random_state))


#: ``jax.random.PRNGKey`` as one compiled program (not one per operation).
_prng_key = jit(jax.random.PRNGKey)


@jit
def _key_seed(key: jax.Array) -> jax.Array:
    """An integer seed in [0, 2^31 - 1) drawn from ``key`` (for host-side generators)."""
    return jax.random.randint(key, (), 0, 2**31 - 1)


@partial(jit, static_argnums=(1, 2, 3))
def _chain_normals(key: jax.Array, num_chains: int, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """Standard normal starting points, chain ``c`` from ``fold_in(key, c)``: a chain's start (and,
    with the driver's per-chain keys, its draws) does not depend on how many chains run."""
    return jax.vmap(lambda k: jax.random.normal(k, shape, dtype))(fold_in_chains(key, num_chains))


@partial(jit, static_argnums=(1, 2, 3, 4))
def _chain_starts(key: jax.Array, num_chains: int, shape: tuple[int, ...], dtype: Any,
                  scale: float) -> tuple[jax.Array, jax.Array]:
    """A sampler's run key and its chains' starting points, ``scale`` times standard normals
    (:func:`_chain_normals`), as one program."""
    k_init, k_run = jax.random.split(key)
    # the barrier keeps XLA from folding the scale into the normals' own scaling (the draws of an op-by-op start)
    return k_run, scale * lax.optimization_barrier(_chain_normals(k_init, num_chains, shape, dtype))
