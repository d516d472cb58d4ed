"""Max-margin discriminant projection (Chen et al. 2015): the scikit-learn estimator.

:class:`MaxMarginProjection` is a multi-class classifier and a transformer: MMLDP (``kernel=None``,
Sec. 4.1), KMMDP (``kernel="rbf"`` or ``"poly"``, Sec. 4.3) and ssKMMDP (``spike_slab=True``,
Sec. 4.4), and the model without the latent representation z_n that the paper compares MMLDP with
(``latent_representation=False``, Sec. 3.2), fitted by the Gibbs samplers of
:mod:`bayes_maxmargin.models.projection.gibbs`,
one-vs-all for more than two classes (Sec. 4.5), the L binary samplers vmapped in one compiled
program.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from bayes_maxmargin._version import __version__
from bayes_maxmargin.core.kernels import PolyParams, SEParams
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.core.memory import check_memory, matrix_bytes
from bayes_maxmargin.core.parameters import params_dict
from bayes_maxmargin.core.predict import distinct_rows
from bayes_maxmargin.core.checks import InvalidParameterError, check_option, check_scalar_param
from bayes_maxmargin.core.kernels import check_kernel_params
from bayes_maxmargin.data.validation import (
    check_array_2d,
    check_finite_output,
    check_magnitude,
    check_n_features,
    check_X_y,
)
from bayes_maxmargin.diagnostics import to_inference_data
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.estimators.base import _as_key, check_mixing_after_fit, reports_progress
from bayes_maxmargin.models.projection.gibbs import (
    build_projection_kernel,
    init_projection,
    record_projection,
)
from bayes_maxmargin.models.projection.model import ProjectionHyper, kernel_features, projection_data
from bayes_maxmargin.models.projection.posterior import ProjectionPosterior

__all__ = ["MaxMarginProjection"]


#: Matrices held at the peak of a fit, counted by shape with D the width of the features (``n_basis``
#: basis vectors, or the number of features without a kernel): N x D (the features and their thin SVD)
#: and D x D, plus the D x K projection, its running sums and usage of every problem and chain. A
#: least-squares fit to the peak resident memory of float64 RBF fits over the process's memory before
#: them, at N, M = 3000 / 1500, 3000 / 750, 1500 / 750, 1500 / 1500, 3000 / 3000, gives 2.5 N x D and
#: 3.2 D x D plus 264 MB (the compiler's; the peaks within 31 MB), rounded up to cover every peak (4, 4);
#: six classes and two chains add 52-60 MB at D = 750 and 1500 alike (a larger program, not larger arrays).
PROJECTION_MATRICES = {"nd": 4, "dd": 4, "dk": 4}


def _check_memory(n: int, width: tuple[str, int], problems: int, components: int, params: dict[str, Any]) -> None:
    """Refuse a fit on ``n`` rows whose features have ``width = (name, D)`` columns when its matrices
    (:data:`PROJECTION_MATRICES`, for ``problems`` one-vs-all problems) do not fit in memory."""
    name, D = width
    c = PROJECTION_MATRICES
    need = matrix_bytes([(c["nd"], n, D), (c["dd"], D, D), (c["dk"] * problems * params["num_chains"], D, components)],
                        params["precision"])
    check_memory(need, what=f"MaxMarginProjection on N = {n} points with features of width D = {D}",
                 sizes=[width, ("the training points", n)])


class MaxMarginProjection(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Max-margin discriminant projection: MMLDP, KMMDP, ssKMMDP (Chen et al. 2015).

    For each binary problem (one per class, one-vs-all, for more than two classes), the latent
    features z_n ~ N(A' x_n, I_K) (MMLDP) or N(Theta' K(V, x_n), I_K) (KMMDP) feed a Bayesian
    SVM f_n = w' z_n + b with the hinge pseudo-likelihood exp(-2 max(1 - y_n f_n, 0)):
    a_k ~ N(0, alpha_k^-1 I), alpha_k ~ Ga(c0, d0), [w; b] ~ N(0, sigma^-1 I), sigma ~ Ga(a0, b0)
    (eq. 5-10, 17-20), and for ssKMMDP theta_lk ~ (1 - pi_l) delta_0 + pi_l N(0, alpha_k^-1),
    pi_l ~ Beta(e0, f0) (eq. 21-22). Predictions average the classifier outputs over the kept draws
    (eq. 23) and take the argmax over the one-vs-all outputs (eq. 24).

    Parameters
    ----------
    n_components : int or None
        K, the dimension of the projected features; None: L - 1 for L classes (1 for two), the
        number of LDA components (the paper's Table 4 setting).
    kernel : {None, "rbf", "poly"}
        None: MMLDP on the features. "rbf": a exp(-||x - v||^2 / theta^2), the paper's Gaussian
        kernel exp(-gamma ||x - v||^2) with theta = gamma^-1/2. "poly": (x' v + c)^d. The same
        kernels and parameters as :class:`GPBSVM`.
    n_basis : int or None
        M, the number of basis vectors (kernel models); None: min(100, n_samples). Must be in
        [1, n_samples].
    basis : {"kmeans", "random"}
        Basis vectors: k-means centres of the training data (the paper's "local centers",
        default) or a random subset of the training points, chosen among the distinct rows: where the
        training data have at most ``n_basis`` distinct rows, they are all of them, each once (fewer
        basis vectors than ``n_basis``).
    spike_slab : bool
        Spike-and-slab prior on Theta (ssKMMDP, needs a kernel).
    latent_representation : bool
        True (default): the latent features z_n ~ N(A' x_n, I_K) feed the classifier (eq. 5-6; A drawn
        given Z, eq. 7 / 20). False: the model without z_n of Sec. 3.2, f_n = w' A' x_n + b (eq. 11),
        each a_k drawn from eq. (12); with z_n integrated out, MMLDP's conditional of a_k is eq. (13),
        whose denominators lambda_n + w_k^2 (lambda_n in eq. 12) tie the scale of a_k to that of w_k.
        Without them ||a_k|| drifts far out along the ridge w_k a_k = const (the paper's Fig. 1,
        :func:`bayes_maxmargin.experiments.chen2015.figure1`); for comparison, not for use. Each sweep
        then costs a D x D (or N x N where D > N) Cholesky per component. Not with ``spike_slab``.
    dense_warmup : int or None
        ssKMMDP: the first ``dense_warmup`` burn-in sweeps draw Theta from its slab-only
        conditional (eq. 20, every theta_lk non-zero), a start for the element-wise
        spike-and-slab step (eq. 22), which then runs for the rest of the burn-in and every kept
        draw. Cold-started, that step is slow to leave a sparse start (see
        :mod:`~bayes_maxmargin.models.projection.gibbs`). None: half of ``num_warmup``; 0:
        eq. (22) from the first sweep. At most ``num_warmup``.
    inference : {"gibbs"}
        The Gibbs sampler of Algorithm 1.
    kernel_params : dict or None
        Kernel parameters, the fields of :class:`~bayes_maxmargin.core.kernels.SEParams` ("rbf":
        ``lengthscale`` theta, ``amplitude`` a) or :class:`~bayes_maxmargin.core.kernels.PolyParams`
        ("poly": ``degree`` d >= 1, ``offset`` c >= 0). Unset fields: theta = sqrt(n_features)
        (gamma = 1 / n_features, the paper's Sec. 5 setting; it tries gamma in 0.01, 0.1, 1, 10),
        a = 1, d = 2 (it tries 1-6), c = 1.
    a0, b0, c0, d0, e0, f0 : float
        Gamma(a0, b0) prior of sigma, Gamma(c0, d0) of alpha_k, Beta(e0, f0) of pi_l (paper: all 1).
    num_samples, num_warmup, num_chains, thin : int
        Kept draws per chain, burn-in iterations, chains, iterations per kept draw. The paper's
        benchmark setting (Sec. 5.3, Table 4) is 100 burn-in and 100 collected samples, one chain.
    precision : {"float64", "float32"}
    progress_bar : bool
    random_state : int, RandomState, JAX PRNG key or None

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    basis_vectors_ : ndarray of shape (M, n_features) (kernel models)
        M = ``n_basis``, or the number of distinct training rows where that is smaller.
    kernel_params_ : dict (kernel models)
        The kernel parameters used, ``kernel_params`` over the defaults.
    coef_ : ndarray of shape (n_problems, D)
        Posterior mean of A w (D = n_features, or n_basis for kernel models), one row per binary
        problem (one for two classes, L for L > 2 one-vs-all): the averaged outputs of eq. (23)
        are ``features(X) @ coef_.T + intercept_``.
    intercept_ : ndarray of shape (n_problems,)
    projection_ : ndarray of shape (n_problems, D, n_components)
        Posterior mean of A (Theta). The posterior is symmetric under a sign flip (or a permutation)
        of a component together with its classifier weight; the chains rarely cross between these
        modes, but a posterior mean of A is only meaningful within one of them.
    basis_usage_ : ndarray of shape (n_problems, D, n_components)
        Posterior frequency of theta_lk != 0, the basis-vector usage matrix (Fig. 2c);
        ones without the spike and slab.
    n_basis_used_ : ndarray of shape (n_chains, n_draws, n_problems)
        Number of basis vectors used (rows of Theta with a non-zero entry) at every kept draw: its
        histogram is the posterior of the number of basis vectors (Fig. 2d).
    idata_ : xarray.DataTree
        ArviZ's DataTree: draws of ``coef`` = A w (the classifier's weights on the features, or with a
        kernel on the basis vectors; its mean is ``coef_``), w, b, alpha, sigma (dims chain, draw,
        problem, ...), the log joint and the basis-vector counts in sample_stats. The posterior is
        symmetric under a change of sign of a component (a_k, z_k, w_k) and under a reordering of the
        components, so w and alpha are identified only up to these and chains may settle in different
        ones; the mixing check judges coef, b and sigma.
    n_iter_ : int
        Gibbs iterations per chain (burn-in included).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from bayes_maxmargin import MaxMarginProjection
    >>> X, y = make_classification(n_samples=80, n_features=6, random_state=0)
    >>> mmldp = MaxMarginProjection(n_components=2, num_warmup=50, num_samples=50,
    ...                             random_state=0).fit(X, y)
    >>> mmldp.transform(X[:5]).shape  # the projected features
    (5, 2)
    >>> mmldp.predict(X[:5]).shape
    (5,)
    """

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: str | None = None,
        n_basis: int | None = None,
        basis: str = "kmeans",
        spike_slab: bool = False,
        latent_representation: bool = True,
        dense_warmup: int | None = None,
        inference: str = "gibbs",
        kernel_params: Mapping[str, Any] | None = None,
        a0: float = 1.0,
        b0: float = 1.0,
        c0: float = 1.0,
        d0: float = 1.0,
        e0: float = 1.0,
        f0: float = 1.0,
        num_samples: int = 100,
        num_warmup: int = 100,
        num_chains: int = 1,
        thin: int = 1,
        precision: str = "float64",
        progress_bar: bool = False,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.n_basis = n_basis
        self.basis = basis
        self.spike_slab = spike_slab
        self.latent_representation = latent_representation
        self.dense_warmup = dense_warmup
        self.inference = inference
        self.kernel_params = kernel_params
        self.a0 = a0
        self.b0 = b0
        self.c0 = c0
        self.d0 = d0
        self.e0 = e0
        self.f0 = f0
        self.num_samples = num_samples
        self.num_warmup = num_warmup
        self.num_chains = num_chains
        self.thin = thin
        self.precision = precision
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _checked_params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "n_components": check_scalar_param("n_components", self.n_components, kind="int", low=1, allow_none=True),
            "kernel": check_option("kernel", self.kernel, (None, "rbf", "poly")),
            "n_basis": check_scalar_param("n_basis", self.n_basis, kind="int", low=1, allow_none=True),
            "basis": check_option("basis", self.basis, ("kmeans", "random")),
            "inference": check_option("inference", self.inference, ("gibbs",)),
            "latent_representation": check_option("latent_representation", self.latent_representation,
                                                  (True, False)),
            "num_samples": check_scalar_param("num_samples", self.num_samples, kind="int", low=1),
            "num_warmup": check_scalar_param("num_warmup", self.num_warmup, kind="int", low=0),
            "num_chains": check_scalar_param("num_chains", self.num_chains, kind="int", low=1),
            "thin": check_scalar_param("thin", self.thin, kind="int", low=1),
            "precision": check_option("precision", self.precision, ("float32", "float64")),
        }
        for name in ("a0", "b0", "c0", "d0", "e0", "f0"):
            p[name] = check_scalar_param(name, getattr(self, name), low=0.0, low_inclusive=False)
        dense = check_scalar_param("dense_warmup", self.dense_warmup, kind="int", low=0, high=p["num_warmup"],
                                   allow_none=True)
        if not isinstance(self.spike_slab, (bool, np.bool_)):
            raise TypeError(f"Invalid value for spike_slab: {self.spike_slab!r} (must be a bool)")
        p["spike_slab"] = bool(self.spike_slab)
        if p["spike_slab"] and p["kernel"] is None:
            raise InvalidParameterError(
                "Invalid value for spike_slab: True needs kernel='rbf' or 'poly' (the spike-and-slab prior "
                "selects basis vectors of the kernel expansion, Chen et al. 2015, Sec. 4.4)"
            )
        if p["spike_slab"] and not p["latent_representation"]:
            raise InvalidParameterError(
                "Invalid value for latent_representation: False cannot be combined with spike_slab=True (the "
                "spike-and-slab step of Chen et al. 2015, eq. 22, draws Theta given the latent features Z)"
            )
        p["latent_representation"] = bool(p["latent_representation"])
        # the dense sweeps the kernel runs: none without the spike and slab, half the burn-in by default
        if not p["spike_slab"]:
            dense = 0
        elif dense is None:
            dense = p["num_warmup"] // 2
        p["dense_warmup"] = dense
        return p

    # ------------------------------------------------------------------ fitting
    @reports_progress
    def fit(self, X: Any, y: Any, *, checkpoint: Any = None, resume: Any = None) -> "MaxMarginProjection":
        """Run the Gibbs sampler(s) on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), at least two classes of two samples each
        checkpoint, resume : path, optional
            Checkpoint folder written after every chunk of iterations, and a checkpoint of the
            same fit to continue from (see :func:`~bayes_maxmargin.engine.mcmc.run_chains`).

        Returns
        -------
        self
        """
        params = self._checked_params()
        name = type(self).__name__
        if y is None:
            raise ValueError(f"{name} requires y to be passed, but the target y is None.")
        columns = list(X.columns) if hasattr(X, "columns") else None
        X, y = check_X_y(X, y, estimator_name=name)
        check_magnitude(X, dtype=params["precision"], n_terms=X.size, columns=columns, estimator_name=name)
        classes, y_idx, counts = np.unique(y, return_inverse=True, return_counts=True)
        if len(classes) < 2:
            raise ValueError(f"{name} needs at least 2 classes in y; got only 1 class {classes.tolist()}")
        few = classes[counts < 2]
        if few.size:
            raise ValueError(
                f"Every class needs at least 2 training samples; class(es) {few.tolist()} have "
                f"{counts[counts < 2].tolist()}"
            )
        n = X.shape[0]
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        if params["kernel"] is not None:
            defaults = SEParams(float(np.sqrt(X.shape[1])), 1.0) if params["kernel"] == "rbf" else PolyParams(2, 1.0)
            params["kernel_params"] = check_kernel_params(params["kernel"], self.kernel_params, defaults)
            self.kernel_params_ = params_dict(params["kernel_params"])
        else:
            self.__dict__.pop("kernel_params_", None)
        L = len(classes)
        K = params["n_components"] or max(L - 1, 1)
        Y = (np.where(y_idx == 1, 1.0, -1.0)[None] if L == 2
             else np.where(y_idx[None, :] == np.arange(L)[:, None], 1.0, -1.0))
        key = _as_key(self.random_state)  # a JAX key: a seed drawn from it, as the other estimators do
        rng = check_random_state(self.random_state if key is None else int(jax.random.randint(key, (), 0, 2**31 - 1)))
        self._params = params
        if params["kernel"] is not None:
            M = params["n_basis"] if params["n_basis"] is not None else min(100, n)
            if M > n:
                raise InvalidParameterError(
                    f"Invalid value for n_basis: {M} (must be at most the number of training samples, {n})"
                )
            _check_memory(n, ("n_basis", M), Y.shape[0], K, params)
            self.basis_vectors_ = self._choose_basis(X, M, params["basis"], rng)
        else:
            _check_memory(n, ("the number of features", X.shape[1]), Y.shape[0], K, params)
            self.__dict__.pop("basis_vectors_", None)
        x64 = params["precision"] == "float64"
        dtype = np.float64 if x64 else np.float32
        seed = int(rng.randint(0, 2**31 - 1))
        with float_precision(x64):
            F = self._features(X.astype(dtype))
            ss = params["spike_slab"]
            data = projection_data(jnp.asarray(F, dtype), jnp.asarray(Y, dtype), ss)
            thin = params["thin"]
            warm = -(-params["num_warmup"] // thin) * thin  # as the driver rounds it
            hyper = ProjectionHyper(*(jnp.asarray(params[k], dtype) for k in ("a0", "b0", "c0", "d0", "e0", "f0")),
                                    jnp.asarray(warm, dtype), jnp.asarray(params["dense_warmup"], dtype))
            init = init_projection(seed, data, K, ss, num_chains=params["num_chains"])
            k_run = jax.random.PRNGKey(seed)
            kernel = build_projection_kernel(ss, F.shape[0] >= F.shape[1], params["latent_representation"])
            res = run_chains(kernel, record_projection, init, k_run, data, hyper, num_warmup=params["num_warmup"],
                             num_samples=params["num_samples"], thin=thin, progress_bar=self.progress_bar,
                             checkpoint=checkpoint, resume=resume,
                             fusion_emitters=True)  # L classes in one program: see compilation
        fs = jax.tree_util.tree_map(np.asarray, res.final_state)
        kept = fs.n_kept[..., None]  # (chain, L, 1)
        self.coef_ = (fs.Aw_sum / kept).mean(0)
        self.intercept_ = (fs.b_sum / kept[..., 0]).mean(0)
        self.projection_ = (fs.A_sum / kept[..., None]).mean(0)
        self.basis_usage_ = (fs.usage_sum / kept[..., None]).mean(0)
        s = res.samples
        self.n_basis_used_ = s["n_basis_used"]
        self.n_iter_ = res.num_iterations
        self.n_components_ = K
        dims = {"coef": ["problem", "feature" if params["kernel"] is None else "basis_vector"],
                "w": ["problem", "component"], "b": ["problem"], "alpha": ["problem", "component"],
                "sigma": ["problem"], "log_joint": ["problem"], "n_basis_used": ["problem"],
                "n_components_used": ["problem"]}
        self.idata_ = to_inference_data(
            {k: s[k] for k in ("coef", "w", "b", "alpha", "sigma")},
            sample_stats={**{k: s[k] for k in ("log_joint", "n_basis_used", "n_components_used")}, **res.info},
            observed_data={"y": np.asarray(y)}, dims=dims,
            attrs={"model": self._model_name(), "inference": "gibbs", "library": f"bayes_maxmargin {__version__}"},
        )
        identified = ("coef", "b", "sigma")  # w and alpha: up to the components' signs and order
        check_mixing_after_fit(self, to_inference_data({k: s[k] for k in identified}, dims=dims))
        return self

    def _model_name(self) -> str:
        p = self._params
        if p["kernel"] is None:
            name = "MMLDP"
        else:
            name = ("ss" if p["spike_slab"] else "") + ("G" if p["kernel"] == "rbf" else "P") + "KMMDP"
        # fits saved before the option existed have the latent representation
        return name if p.get("latent_representation", True) else f"{name} without z_n (eq. 11)"

    @staticmethod
    def _choose_basis(X: np.ndarray, M: int, basis: str, rng: np.random.RandomState) -> np.ndarray:
        first = distinct_rows(X)
        if first.size <= M:  # every distinct row, once (k-means would leave centres without a point)
            return X[first].copy()
        if basis == "random":
            return X[first[np.sort(rng.choice(first.size, M, replace=False))]].copy()
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=M, n_init=1, max_iter=100, random_state=rng.randint(0, 2**31 - 1))
        return km.fit(X).cluster_centers_

    def _features(self, X: np.ndarray) -> np.ndarray:
        p = self._params
        if p["kernel"] is None:
            return X
        return kernel_features(X, self.basis_vectors_.astype(X.dtype), p["kernel"], p["kernel_params"])

    def _predict_features(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "coef_")
        name = type(self).__name__
        columns = list(X.columns) if hasattr(X, "columns") else None
        X = check_array_2d(X, estimator_name=name)
        check_n_features(X, self.n_features_in_, name)
        check_magnitude(X, dtype=self.precision, n_terms=X.shape[1], columns=columns, estimator_name=name)
        return self._features(X.astype(self.coef_.dtype))

    # ------------------------------------------------------------------ outputs
    @property
    def _posterior(self) -> ProjectionPosterior:
        """The fit's :class:`~bayes_maxmargin.models.projection.posterior.ProjectionPosterior`: the averaged
        classifier and projection, and the kept draws of A w and b in ``idata_`` (None in files written
        before the draws of A w were kept)."""
        check_is_fitted(self, "coef_")
        draws = self.idata_.posterior
        if "coef" not in draws:
            return ProjectionPosterior(self.coef_, self.intercept_, self.projection_, None, None)
        coef, b = (np.asarray(draws[k]) for k in ("coef", "b"))  # views of the draws, not copies
        return ProjectionPosterior(self.coef_, self.intercept_, self.projection_,
                                   coef.reshape(-1, *coef.shape[2:]), b.reshape(-1, b.shape[-1]))

    def decision_function(self, X: Any) -> np.ndarray:
        """Classifier outputs averaged over the kept draws, U(x) = mean_t (w_t' z_t + b_t) (eq. 23-24).

        Shape (n,) for two classes (positive: ``classes_[1]``), (n, n_classes) otherwise.
        """
        U = self._posterior.decision(self._predict_features(X))
        check_finite_output(U, "decision function")
        return U[:, 0] if len(self.classes_) == 2 else U

    def predict(self, X: Any) -> np.ndarray:
        """The class of the largest averaged output (eq. 24; the sign of eq. 23 for two classes)."""
        U = self.decision_function(X)
        idx = (U > 0).astype(int) if U.ndim == 1 else np.argmax(U, axis=1)
        return self.classes_[idx]

    def transform(self, X: Any) -> np.ndarray:
        """Posterior-mean projected features mean_t(A_t)' x (mean_t(Theta_t)' K(V, x) for kernels).

        Shape (n, n_components) for two classes; (n, n_classes * n_components) otherwise, the
        projections of the one-vs-all problems side by side.
        """
        Zs = self._posterior.projected(self._predict_features(X))
        check_finite_output(Zs, "projected features")
        return Zs

    def _check_restored(self) -> None:
        """Raise ValueError where the state :func:`bayes_maxmargin.load` rebuilt does not hang together
        (a damaged or edited file): the widths of ``coef_``, ``intercept_``, ``projection_`` and the
        basis against ``classes_`` and ``n_features_in_``."""
        problems = 1 if len(self.classes_) == 2 else len(self.classes_)
        d, basis = self.n_features_in_, self.__dict__.get("basis_vectors_")
        if basis is not None and (np.ndim(basis) != 2 or np.shape(basis)[1] != d):
            raise ValueError(f"basis_vectors_ has shape {np.shape(basis)}, not (M, {d})")
        width = d if self._params["kernel"] is None else np.shape(basis)[0]
        for name, shape in (("coef_", (problems, width)), ("intercept_", (problems,))):
            if np.shape(self.__dict__[name]) != shape:
                raise ValueError(f"{name} has shape {np.shape(self.__dict__[name])}, not {shape}")
        if np.shape(self.projection_)[:2] != (problems, width):
            raise ValueError(f"projection_ has shape {np.shape(self.projection_)}, not ({problems}, {width}, k)")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags
