"""``FactorBSVM``: discriminative factor models (Henao et al. 2014, Sec. 5) as a scikit-learn
classifier that is also a transformer (``transform`` gives factor scores).

The eight variants of the paper's Table 3:

==========  ==========================================================================
FM+L        ``FactorBSVM(joint=False, classifier="linear")``  (factor model, then linear BSVM)
FM+N        ``FactorBSVM(joint=False, classifier="gp")``      (factor model, then GP BSVM)
LDFM        ``FactorBSVM(classifier="linear")``               (joint, Gibbs)
VLDFM       ``FactorBSVM(classifier="linear", inference="vbem")``
LDFM+N      ``FactorBSVM(classifier="linear", second_stage="gp")``
VLDFM+N     ``FactorBSVM(classifier="linear", inference="vbem", second_stage="gp")``
NDFM        ``FactorBSVM(classifier="gp")``                   (joint, Gibbs + elliptical slice)
VNDFM       ``FactorBSVM(classifier="gp", inference="vbem")``
==========  ==========================================================================

and the joint nonlinear model with the probit link of GP classification that Sec. 6 compares with
NDFM on USPS: ``FactorBSVM(classifier="gp", link="probit")`` (Gibbs with the Albert & Chib 1993
augmentation; ``classifier="linear"`` gives its linear counterpart).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr
from sklearn.base import TransformerMixin

from bayes_maxmargin.core.kernels import Kernel, as_kernel
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.core.memory import check_dense_memory
from bayes_maxmargin.core.parameters import (
    Unflatten,
    free_fields,
    from_unconstrained,
    params_dict,
    replace_fields,
    to_unconstrained,
    trainable_fields,
)
from bayes_maxmargin.core.checks import InvalidParameterError, check_option, check_scalar_param
from bayes_maxmargin.core.kernels import check_kernel_params
from bayes_maxmargin.data.validation import check_finite_output
from bayes_maxmargin.diagnostics import APPROXIMATION_DRAWS, to_inference_data
from bayes_maxmargin.engine.checkpoint import checkpoint_folder
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.estimators.base import _BayesianSVMClassifier, _sub_restored, _sub_saved, reports_progress
from bayes_maxmargin.estimators.gp import GPBSVM
from bayes_maxmargin.estimators.linear import LinearBSVM
from bayes_maxmargin.estimators.multiclass import classes_together, register_batched
from bayes_maxmargin.estimators.registry import Method, Registry
from bayes_maxmargin.models.factor.gibbs import build_factor_kernel, build_factor_record, init_factor
from bayes_maxmargin.models.factor.model import FactorData, FactorHyper
from bayes_maxmargin.models.factor.posterior import DrawsPosterior, InterceptLinearKernel, VBPosterior
from bayes_maxmargin.models.factor.vbem import VBHyper, init_vb, run_vbem, run_vbem_batched
from bayes_maxmargin.models.gp.model import kernel_prior

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["FACTOR_METHODS", "FactorBSVM", "FactorMethod"]

register_batched(run_vbem, run_vbem_batched)


#: Dense N x N matrices held at the peak of a fit whose classifier has an N x N covariance (the
#: VB-EM fits, the joint Gibbs fit of the GP classifier): as for the full-GP fits of GPBSVM.
DENSE_BUFFERS = 12


class FactorBSVM(TransformerMixin, _BayesianSVMClassifier):
    """Discriminative factor model with a linear or GP Bayesian SVM on the factor scores.

    x_n = A w_n + eps_n with Laplace-shrunk loadings (a_ik | phi_ik ~ N(0, phi_ik), phi_ik ~
    Exp(nu / 2)), w_n ~ N(0, I), eps_n ~ N(0, I / psi), psi ~ Ga(a_psi, b_psi), and the max-margin
    pseudo-likelihood of a classifier on w_n (Henao et al. 2014, Sec. 5). The data are centred
    (column means stored in ``mean_``).

    Multi-class: a y of K > 2 classes is fitted one-vs-rest (:mod:`bayes_maxmargin.estimators.multiclass`),
    K joint models "class k vs rest" run together (one Gibbs run over the stacked chains of all
    classes, or one class-vmapped VB-EM loop), with keys ``fold_in(key, k)``; ``estimators_``
    holds them, ``predict_proba`` normalises their K probit probabilities, ``transform`` returns
    their K score blocks side by side, fitted arrays such as ``loadings_`` get a leading class
    axis and ``idata_`` a ``class`` dimension.

    Parameters
    ----------
    n_factors : int
        K, 1 <= K <= min(n_samples, n_features).
    classifier : {"linear", "gp"}
        Classifier on the factor scores (joint model), or the second stage after the factor model
        when ``joint=False``.
    inference : {"gibbs", "vbem"}
        MCMC (Gibbs; elliptical slice sampling of W for the GP classifier) or VB-EM.
    joint : bool
        Fit factor model and classifier jointly (LDFM / NDFM); False: factor model alone, then the
        classifier on its scores (FM+L / FM+N).
    second_stage : {None, "linear", "gp"}
        With ``joint=True``: refit this classifier on the joint model's scores (LDFM+N: "gp").
    link : {"hinge", "probit"}
        Likelihood of the labels given the classifier's f: the max-margin pseudo-likelihood (the
        paper's models), or the probit link of GP classification, y ~ Bernoulli(Phi(f)), sampled with
        the Albert & Chib (1993) augmentation z ~ N(f, 1) truncated to the sign of y (Sec. 6, "a
        joint nonlinear model with a probit link"). The probit link is fitted by
        ``inference="gibbs"`` with ``joint=True`` and no ``second_stage``; ``gamma``,
        ``gamma_prior`` and ``gamma0`` do not apply to it. Its ``predict_proba`` is the posterior
        mean of Phi(f*): the mean over the draws of Phi(m_s / sqrt(1 + v_s)), m_s and v_s the
        predictive moments of f* given draw s, and ``decision_function`` is Phi^-1 of it.
    nu : float
        Laplace rate of the loadings.
    psi_prior : (a_psi, b_psi)
        Gamma prior of the noise precision.
    gamma, gamma_prior, gamma0 : float, (a0, b0) or None, float
        Hinge scale (initial value when ``gamma_prior`` is given), its Gamma prior, lambda's Exp
        rate for MCMC (VB-EM uses the hinge, gamma0 = 0, as the paper; it needs ``gamma_prior``,
        (1, 1) if None).
    rho : float or None
        Factor-score selection g_k ~ Exp(rho / 2) for the linear classifier (Gibbs).
    intercept_scale : float
        Prior sd of the linear classifier's intercept.
    kernel : {"rbf", "ard"} or Kernel
        SE or ARD SE covariance on the scores (GP classifier), as in :class:`GPBSVM`, or a kernel object of
        :mod:`bayes_maxmargin.core.kernels` (composed ones too; ``kernel_params`` then by path, and VB-EM
        learns its length-scales).
    kernel_params : dict or None
        Kernel parameters (fixed in MCMC unless ``learn_kernel`` samples them, the initial values in
        VB-EM; the prior median of the sampled ones), the fields of
        :class:`~bayes_maxmargin.core.kernels.SEParams` (``lengthscale``, ``amplitude``) or
        :class:`~bayes_maxmargin.core.kernels.ARDParams` (``lengthscales``, ``amplitude``); unset fields:
        length-scale(s) sqrt(2 K), the typical distance between two prior draws w ~ N(0, I_K),
        unit amplitude.
    learn_kernel : bool, sequence of str or None
        The GP classifier's kernel parameters that are learnt: all positive fields (True), none (False),
        or the named ones (e.g. ``("lengthscale",)``), as in :class:`GPBSVM`. Gibbs (NDFM): sampled,
        under independent log-normal priors centred at ``kernel_params`` with standard deviation
        ``kernel_prior_scale``, by the slice sampler of ``GPBSVM(inference="gibbs")`` (Sec. 3) given
        the current factor scores, every sweep. VB-EM (VNDFM): by ML-II in the M-step, jointly with
        the scores (the paper's M-step optimises W and theta). Two-step and second-stage GP
        classifiers (FM+N, LDFM+N): passed to their ``GPBSVM``. None: nothing learnt by Gibbs, the
        length-scales by VB-EM (the paper's SE kernel has no amplitude), the ``GPBSVM`` default for a
        second stage. Refused for variants without a GP classifier.
    kernel_prior_scale : float
        Gibbs with ``learn_kernel``: standard deviation of log theta under its log-normal prior.
    n_blocks : int or None
        Blocks of the elliptical slice update of W per sweep; None: one score at a time, the paper's
        scheme (O(n^2) per likelihood evaluation against O(n^3) for a block; on USPS 3 vs 5 the
        same test errors as 8 blocks at three times the time).
    num_warmup, num_samples, thin, num_chains : int
        MCMC run (the paper: 600 warm-up, 60 kept draws thinned by 10).
    max_iter, m_steps : int
        VB-EM iterations and L-BFGS steps per M-step.
    precision : {"float64", "float32"}
        Floating-point precision of the fit (local; the global JAX setting is untouched);
        predictions and scores are computed in float64.
    progress_bar : bool
    random_state : int, RandomState, JAX PRNG key or None

    Attributes
    ----------
    loadings_ : ndarray (n_features, n_factors)
        Posterior mean (or q mean) of A.
    mean_ : ndarray (n_features,)
        Column means of the training X (the model is fitted to the centred data).
    n_iter_ : int
        Iterations run: VB-EM iterations (``max_iter``; the loop has no early stop), or Gibbs
        sweeps, ``num_warmup + num_samples * thin``.
    kernel_params_ : dict
        GP classifier: the kernel parameters, fixed or their posterior mean where ``learn_kernel``
        samples them (Gibbs), or after the M-steps (VB-EM).
    bound_ : ndarray of shape (2 * ``n_iter_``,)
        VB-EM only: the lower bound F after every E-step and every M-step.
    idata_ : xarray.DataTree
        ArviZ's DataTree: draws of A, psi, gamma and the sampled kernel fields (Gibbs), or independent draws of q(A) q(psi) q(gamma)
        (VB-EM, ``posterior.attrs["approximation"]``, with the learnt kernel parameters in ``constant_data``).
    fit_time_ : float

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from bayes_maxmargin import FactorBSVM
    >>> X, y = make_classification(n_samples=80, n_features=12, n_informative=4, random_state=0)
    >>> clf = FactorBSVM(n_factors=3, inference="vbem", max_iter=5, random_state=0).fit(X, y)
    >>> clf.loadings_.shape, clf.transform(X[:5]).shape
    ((12, 3), (5, 3))
    >>> clf.bound_.shape  # the VB-EM bound after every E- and M-step
    (10,)
    >>> list(clf.factor_lists(threshold=0.1).columns)
    ['factor', 'feature', 'loading']
    """

    def __init__(
        self,
        n_factors: int = 10,
        classifier: str = "linear",
        inference: str = "gibbs",
        joint: bool = True,
        second_stage: str | None = None,
        *,
        link: str = "hinge",
        nu: float = 1.0,
        psi_prior: tuple[float, float] = (1.0, 1.0),
        gamma: float = 1.0,
        gamma_prior: tuple[float, float] | None = (1.0, 1.0),
        gamma0: float = 0.1,
        rho: float | None = None,
        intercept_scale: float = 1.0,
        kernel: str = "rbf",
        kernel_params: Mapping[str, Any] | None = None,
        learn_kernel: bool | tuple[str, ...] | None = None,
        kernel_prior_scale: float = 1.0,
        n_blocks: int | None = 8,
        num_warmup: int = 600,
        num_samples: int = 60,
        thin: int = 10,
        num_chains: int = 1,
        max_iter: int = 30,
        m_steps: int = 10,
        precision: str = "float64",
        progress_bar: bool = False,
        random_state: Any = None,
    ) -> None:
        self.n_factors = n_factors
        self.classifier = classifier
        self.inference = inference
        self.joint = joint
        self.second_stage = second_stage
        self.link = link
        self.nu = nu
        self.psi_prior = psi_prior
        self.gamma = gamma
        self.gamma_prior = gamma_prior
        self.gamma0 = gamma0
        self.rho = rho
        self.intercept_scale = intercept_scale
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.learn_kernel = learn_kernel
        self.kernel_prior_scale = kernel_prior_scale
        self.n_blocks = n_blocks
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.thin = thin
        self.num_chains = num_chains
        self.max_iter = max_iter
        self.m_steps = m_steps
        self.precision = precision
        self.progress_bar = progress_bar
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self, X: np.ndarray) -> FactorMethod:
        """Check the parameters against the training inputs ``X``; return the inference method."""
        n, d = X.shape
        if isinstance(self.n_factors, bool) or not isinstance(self.n_factors, (int, np.integer)):
            raise InvalidParameterError(f"n_factors must be an integer, got {self.n_factors!r}")
        for bound, name in ((d, "n_features"), (n, "n_samples")):
            if not 1 <= self.n_factors <= bound:
                raise InvalidParameterError(
                    f"n_factors must satisfy 1 <= n_factors <= {name} = {bound}, got {self.n_factors}"
                )
        check_option("classifier", self.classifier, ("linear", "gp"))
        method = FACTOR_METHODS.check(self.inference)
        check_option("second_stage", self.second_stage, (None, "linear", "gp"))
        self._check_link()
        if not isinstance(self.kernel, Kernel):
            check_option("kernel", self.kernel, ("rbf", "ard"))
        check_option("precision", self.precision, ("float32", "float64"))
        for name in ("nu", "gamma", "intercept_scale"):
            check_scalar_param(name, getattr(self, name), low=0.0, low_inclusive=False)
        check_scalar_param("gamma0", self.gamma0, low=0.0)
        check_scalar_param("rho", self.rho, low=0.0, low_inclusive=False, allow_none=True)
        for name in ("num_warmup",):
            check_scalar_param(name, getattr(self, name), kind="int", low=0)
        for name in ("num_samples", "thin", "num_chains", "max_iter", "m_steps"):
            check_scalar_param(name, getattr(self, name), kind="int", low=1)
        check_scalar_param("n_blocks", self.n_blocks, kind="int", low=1, allow_none=True)
        if not self.joint and not method.two_stage:
            able = " or ".join(map(repr, FACTOR_METHODS.names(lambda m: m.two_stage)))
            raise InvalidParameterError(
                f"joint=False (the factor model alone, then a classifier: FM+L / FM+N) is fitted by "
                f"inference={able}; inference={method.name!r} is implemented for the joint models (VLDFM, VNDFM)"
            )
        if self.n_blocks is not None and self.n_blocks > n:
            raise InvalidParameterError(f"n_blocks must be <= n_samples = {n}, got {self.n_blocks}")
        for name in ("psi_prior", "gamma_prior"):
            value = getattr(self, name)
            if value is None and name == "gamma_prior":
                continue
            if len(value) != 2 or min(value) <= 0:
                raise InvalidParameterError(f"{name} must be a pair of positive numbers, got {value!r}")
        self._theta()  # validates kernel_params
        check_scalar_param("kernel_prior_scale", self.kernel_prior_scale, low=0.0, low_inclusive=False)
        self._learned()  # validates learn_kernel
        std = X.std(axis=0)
        const = np.flatnonzero(std <= 1e-12 * np.maximum(1.0, np.abs(X).max(axis=0)))
        if const.size:
            names = getattr(self, "feature_names_in_", None)
            cols = [str(names[j]) if names is not None else str(j) for j in const[:10]]
            raise ValueError(
                f"FactorBSVM: X has {const.size} constant column(s) (index {', '.join(cols)}"
                f"{', ...' if const.size > 10 else ''}); the factor model needs every feature to vary. "
                "Remove them first (e.g. sklearn.feature_selection.VarianceThreshold)."
            )
        return method

    # ------------------------------------------------------------------ fit
    @reports_progress
    def fit(self, X: Any, y: Any, *, checkpoint: Any = None, resume: Any = None) -> "FactorBSVM":
        """Fit the factor model and its classifier (jointly, or in two steps).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Two or more classes; K > 2 classes are fitted one-vs-rest.
        checkpoint, resume : path, optional
            Checkpoint folder written after every chunk of iterations, and a checkpoint of the same fit
            to continue from (see :func:`~bayes_maxmargin.engine.mcmc.run_chains` and
            :func:`~bayes_maxmargin.engine.resumable.run_resumable`); K > 2 classes in one checkpoint.

        Returns
        -------
        self
        """
        if self._fit_multiclass(X, y, checkpoint=checkpoint, resume=resume):
            return self
        run_io = self._run_io(self.inference, checkpoint, resume)
        X, y = self._fit_input(X, y)
        method = self._check_params(X)
        if method.dense or (self.joint and self.classifier == "gp"):
            check_dense_memory(
                X.shape[0], self.precision, DENSE_BUFFERS,
                what=f"FactorBSVM(classifier={self.classifier!r}, inference={self.inference!r})",
                advice="subsample the training points", classes=classes_together(self),
            )
        self.mean_ = X.mean(axis=0)
        Xc = X - self.mean_
        t0 = time.perf_counter()
        x64 = self.precision == "float64"
        Xc = Xc.astype(np.float64 if x64 else np.float32)
        with float_precision(x64):
            identified = method.fit(self, Xc, y, run_io)
        self._check_mixing(identified)
        self._stage2 = None
        stage2 = self.classifier if not self.joint else self.second_stage
        if stage2 is not None:
            scores = self.transform(X)
            if stage2 == "linear":
                est = LinearBSVM(inference="gibbs", num_samples=500, num_warmup=250, num_chains=2,
                                 progress_bar=False, random_state=self.random_state)
            else:
                learn = {} if self.learn_kernel is None else {"learn_kernel": self.learn_kernel}
                est = GPBSVM(kernel=self.kernel, inference="ecm", progress_bar=False,
                             random_state=self.random_state, **learn)
            self._stage2 = est.fit(scores, self._encoder.inverse_transform(y))
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _check_link(self) -> str:
        """The checked ``link``: one of the two, and the probit link only where it is implemented (the joint
        Gibbs fit without a second stage)."""
        link = check_option("link", self.link, ("hinge", "probit"))
        if link == "probit":
            (probit,) = FACTOR_METHODS.names(lambda m: m.probit)
            for name, value, allowed in (("inference", self.inference, probit), ("joint", self.joint, True),
                                         ("second_stage", self.second_stage, None)):
                if value != allowed:
                    raise InvalidParameterError(
                        f"link='probit' is implemented for the joint Gibbs fit ({name}={allowed!r}), not "
                        f"{name}={value!r}; use link='hinge' for it")
        return link

    def _theta(self):
        """The classifier's kernel parameters: ``kernel_params`` over the defaults."""
        K = self.n_factors
        try:
            defaults = as_kernel(self.kernel).init_params(np.zeros((1, K)), lengthscale=float(np.sqrt(2.0 * K)))
            return check_kernel_params(self.kernel, self.kernel_params, defaults)
        except ValueError as err:  # ARD length-scales: one per factor, not per feature
            raise InvalidParameterError(f"{err}; the kernel acts on the n_factors={K} factor scores") from None

    def _learned(self) -> tuple[str, ...] | None:
        """The kernel fields ``learn_kernel`` names (None when it is None); refused without a GP classifier."""
        if self.learn_kernel is None:
            return None
        if self.classifier != "gp" and not (self.joint and self.second_stage == "gp"):
            raise InvalidParameterError(
                f"learn_kernel={self.learn_kernel!r} applies to a GP classifier on the factor scores, and "
                f"classifier={self.classifier!r} with second_stage={self.second_stage!r} has no kernel; "
                "leave learn_kernel=None, or use classifier='gp' (NDFM, VNDFM, FM+N) or second_stage='gp'")
        try:
            return trainable_fields(self._theta(), self.learn_kernel)
        except ValueError as err:
            raise InvalidParameterError(str(err)) from None

    def _fit_gibbs(self, X: np.ndarray, y: np.ndarray, run_io: dict[str, Any]) -> xr.DataTree:
        """Fit by Gibbs; return the draws that the mixing check judges: those the posterior's symmetry under
        sign changes and reorderings of the factors (with their loadings and classifier weights) leaves
        alone: psi, gamma, the intercept, f at the training points, the communalities sum_k a_jk^2 and the
        kernel fields of an isotropic kernel."""
        structure = self.classifier if self.joint else "none"
        a0, b0 = self.gamma_prior if self.gamma_prior is not None else (1.0, 1.0)
        hyper = FactorHyper(*(jnp.asarray(float(v), X.dtype) for v in (
            self.nu, self.psi_prior[0], self.psi_prior[1], self.gamma, a0, b0, self.gamma0,
            self.rho if self.rho is not None else 1.0, 1.0 / self.intercept_scale**2)))
        theta = jax.tree.map(lambda v: jnp.asarray(v, X.dtype), self._theta())
        learn = self._learned() if structure == "gp" else None
        prior = kernel_prior(theta, float(self.kernel_prior_scale), learn) if learn else None
        data = FactorData(jnp.asarray(X), jnp.asarray(y, X.dtype), theta, jnp.asarray(1e-6, X.dtype), prior)
        unflatten = Unflatten.of(theta) if learn else None  # theta sampled (slice steps given the scores)
        link = self._check_link()
        kern = build_factor_kernel(structure, self.gamma_prior is not None and link == "hinge", self.rho is not None,
                                   True, as_kernel(self.kernel).structure(),
                                   None if self.n_blocks is None else int(self.n_blocks), unflatten,
                                   link=link)
        s0 = init_factor(data, hyper, int(self.n_factors), structure, link=link)
        init = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (self.num_chains,) + a.shape), s0)
        res = self._solve(run_chains, kern, build_factor_record(unflatten, learn), init, self._fit_key(), data, hyper,
                         num_warmup=self.num_warmup, num_samples=self.num_samples, thin=self.thin,
                         chunk_size=20, progress_bar=self.progress_bar, **run_io)
        s = res.samples
        draws = {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in s.items()}
        gp = structure == "gp"
        self._posterior = DrawsPosterior(draws, structure, y, as_kernel(self.kernel).structure() if gp else None,
                                         self._theta() if gp else None)
        sampled = {k: draws[k].mean(0) for k in learn or ()}  # kernel_params_: the posterior mean
        self._set_kernel_params(replace_fields(self._theta(), sampled) if structure == "gp" else None)
        self.loadings_ = draws["A"].mean(0)
        self.n_iter_ = int(self.num_warmup) + int(self.num_samples) * int(self.thin)
        post = {"psi": s["psi"], "A": s["A"]}
        if structure != "none" and link == "hinge":
            post["gamma"] = s["gamma"]
        if structure == "linear":
            post["beta"] = s["coef"][..., :-1]
            post["intercept"] = s["coef"][..., -1]
        post.update({k: s[k] for k in learn or ()})  # the theta draws
        self.idata_ = to_inference_data(post, sample_stats=res.info,
                                        attrs={"model": "FactorBSVM", "inference": self.inference})
        identified = {k: post[k] for k in ("psi", "gamma", "intercept") if k in post}
        # per-factor length-scales (ARD's) follow the factors' order, which the chains do not identify
        identified |= {k: s[k] for k in learn or () if k.rpartition("__")[2] != "lengthscales"}
        identified |= {"f": s["f"], "communality": np.sum(np.asarray(s["A"]) ** 2, axis=-1)}
        return to_inference_data(identified, dims={"f": ["obs"], "communality": ["feature"]})

    def _fit_vbem(self, X: np.ndarray, y: np.ndarray, run_io: dict[str, Any]) -> None:
        """Fit by VB-EM (its draws are of the approximation: no mixing to judge)."""
        a0, b0 = self.gamma_prior if self.gamma_prior is not None else (1.0, 1.0)
        hyper = VBHyper(float(self.nu), float(self.psi_prior[0]), float(self.psi_prior[1]), float(a0), float(b0))
        kernel = self._vb_kernel()
        like = self._theta() if self.classifier == "gp" else None
        theta = to_unconstrained(like) if like is not None else {}
        Xj, yj = jnp.asarray(X), jnp.asarray(y, X.dtype)
        s0 = init_vb(Xj, yj, int(self.n_factors), theta, hyper, self.gamma)
        fields = self._learned()  # ML-II in the M-step; by default the length-scales (the paper's SE has no amplitude)
        learn = {} if like is None else {"learn": fields if fields is not None else tuple(
            p for p in free_fields(like) if p.rpartition("__")[2] in ("lengthscale", "lengthscales"))}
        vbem = dict(n_iter=int(self.max_iter), m_steps=int(self.m_steps), **learn)
        if checkpoint_folder(**run_io) is None:
            state, trace = self._solve(run_vbem, Xj, yj, s0, kernel, like, hyper, **vbem)
        else:  # in the main thread, in chunks (a checkpoint applies to a binary problem, not batched)
            state, trace = run_vbem(Xj, yj, s0, kernel, like, hyper, **vbem, **run_io)
        # host copies: a jax float64 array would come back as float32 outside x64 mode
        state, like = jax.tree.map(np.asarray, (state, like))
        self._posterior = VBPosterior(state, like, y, kernel)
        self._set_kernel_params(from_unconstrained(state.theta, like) if like is not None else None)
        self.loadings_ = np.asarray(state.mA)
        self.bound_ = np.asarray(trace).ravel()
        self.n_iter_ = int(self.max_iter)
        rng = np.random.default_rng(self._fit_seed())
        size = APPROXIMATION_DRAWS
        # q(A): rows a_j ~ N(mA_j, SA_j); q(psi_j) = Gamma(psi_a, psi_b); q(gamma) = Gamma(gam_a, gam_b)
        half = np.linalg.cholesky(np.asarray(state.SA))  # (d, K, K)
        z = rng.standard_normal((*size, *state.mA.shape))
        post = {"A": np.asarray(state.mA) + np.einsum("jkl,cdjl->cdjk", half, z),
                "psi": _gamma_draws(rng, state.psi_a, state.psi_b, size),
                "gamma": _gamma_draws(rng, state.gam_a, state.gam_b, size)}
        self.idata_ = to_inference_data(post, sample_stats={"bound": self.bound_[None]},
                                        constant_data=vars(self).get("kernel_params_"),
                                        attrs={"model": "FactorBSVM", "inference": self.inference},
                                        approximation=FACTOR_METHODS[self.inference].approximation)

    def _set_kernel_params(self, theta: Any) -> None:
        """``kernel_params_`` of the GP classifier (none for the linear one)."""
        if theta is None:
            self.__dict__.pop("kernel_params_", None)
        else:
            self.kernel_params_ = params_dict(theta)

    def _vb_kernel(self):
        """The VB-EM classifier's kernel, as saved with the fit: the GP's object, or for the linear classifier
        k(w, w') = w'w + s^2 (beta ~ N(0, I), b ~ N(0, s^2) integrated out)."""
        if self.classifier == "gp":
            return as_kernel(self.kernel).structure()
        return InterceptLinearKernel(float(self.intercept_scale) ** 2)

    # ------------------------------------------------------------------ transform / predict
    def _scores(self, Xc: np.ndarray) -> np.ndarray:
        """E[w | x, A, psi] = S_N psi A' x, averaged over the posterior."""
        with float_precision(True):
            return self._posterior.scores(Xc)

    def transform(self, X: Any) -> np.ndarray:
        """Factor scores of new data: the posterior mean of E[w | x, A, psi] (labels unknown).

        Shape (n_samples, n_factors); for K > 2 classes the scores of the K one-vs-rest factor
        models side by side, (n_samples, n_classes * n_factors), class k in columns
        ``k * n_factors:(k + 1) * n_factors``.
        """
        X = self._predict_input(X)
        if self._multiclass:
            scores = np.hstack([sub.transform(X) for sub in self.estimators_])
        else:
            scores = self._scores(X - self.mean_)
        check_finite_output(scores, "factor scores")
        return scores

    def fit_transform(self, X: Any, y: Any = None, **fit_params) -> np.ndarray:
        return self.fit(X, y).transform(X)

    def _latent_moments(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._stage2 is not None:
            return self._stage2.predict_latent(self._scores(X - self.mean_))
        with float_precision(True):
            return self._posterior.latent_moments(X - self.mean_)

    def _probit_margin(self, X: np.ndarray) -> np.ndarray:
        """Probit link: Phi^-1(E[Phi(f*)]) per point, (n,) or (n, K) for K one-vs-rest classes."""
        if self._multiclass:
            return np.column_stack([sub._probit_margin(X) for sub in self.estimators_])
        with float_precision(True):
            r = self._posterior.probit_margin(X - self.mean_)
        check_finite_output(r, "probit-scale margin")
        return r

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior predictive class probabilities, columns as ``classes_``.

        ``link="hinge"``: as :class:`~bayes_maxmargin.LinearBSVM`, Phi(m / sqrt(1 + v)) from the
        predictive moments of f. ``link="probit"``: the posterior mean of Phi(f*), the mean over the
        draws of Phi(m_s / sqrt(1 + v_s)); K > 2 classes: the one-vs-rest probabilities normalised to sum
        to one.
        """
        if self.link != "probit":
            return super().predict_proba(X)
        p = ndtr(self._probit_margin(self._predict_input(X)))
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    def decision_function(self, X: Any) -> np.ndarray:
        """Probit-scale margin: m / sqrt(1 + v) (``link="hinge"``, see the base class), or Phi^-1 of the
        one-vs-rest probabilities E[Phi(f*)] (``link="probit"``), so that ``predict_proba[:, 1] =
        Phi(decision_function)`` for two classes either way."""
        if self.link != "probit":
            return super().decision_function(X)
        return self._probit_margin(self._predict_input(X))

    #: What every binary fit sets (:meth:`_check_restored`).
    _FITTED = ("_posterior", "mean_", "loadings_")
    #: One OpenBLAS thread during fits (:func:`~bayes_maxmargin.estimators.base.reports_progress`): Gibbs and
    #: VB-EM factorise small N x N and K x K matrices in every sweep, which threads slow down on shared
    #: cores (NDFM, 150 x 30 rows, 120 sweeps: 0.9-1.0 s against 1.3 s with two threads at load 4).
    _FIT_BLAS_THREADS = 1

    def _check_restored(self) -> None:
        """As the base class; and the centring ``mean_`` has ``n_features_in_`` entries, ``loadings_`` as many
        rows."""
        super()._check_restored()
        mean = self.__dict__.get("mean_")
        if mean is not None and not self._multiclass and np.shape(mean) != (self.n_features_in_,):
            raise ValueError(f"mean_ has shape {np.shape(mean)}, not ({self.n_features_in_},)")
        loadings = self.__dict__.get("loadings_")
        if loadings is not None and not self._multiclass and (
                np.ndim(loadings) != 2 or np.shape(loadings)[0] != self.n_features_in_):
            raise ValueError(f"loadings_ has shape {np.shape(loadings)}, not ({self.n_features_in_}, n_factors)")

    def _saved_state(self) -> dict[str, Any]:
        """As the base class; a second-stage classifier (``joint=False``, ``second_stage``) as its parameters
        and saved state (its draws are not needed to predict)."""
        state = super()._saved_state()
        if state.get("_stage2") is not None:
            state["_stage2"] = _sub_saved(state["_stage2"])
        return state

    def _restore_saved(self, state: dict[str, Any]) -> None:
        if "_structure" in state:  # written before the typed posteriors
            state = _posterior_from_attributes(state, self)
        if isinstance(state.get("_stage2"), dict):
            stage = self.second_stage if self.joint else self.classifier
            state = {**state, "_stage2": _sub_restored(LinearBSVM if stage == "linear" else GPBSVM, state["_stage2"])}
        super()._restore_saved(state)

    # ------------------------------------------------------------------ gene lists
    def factor_lists(self, threshold: float = 0.1, feature_names: Any = None):
        """The features of each factor with ``|a_ik|`` > threshold (the paper's gene lists, Sec. 6).

        Returns a pandas DataFrame with columns factor, feature, loading, sorted by factor and
        decreasing ``|loading|``; write it with ``.to_csv``.
        """
        import pandas as pd

        check_scalar_param("threshold", threshold, low=0.0)
        A = self.loadings_
        names = feature_names if feature_names is not None else getattr(
            self, "feature_names_in_", np.array([f"x{i}" for i in range(A.shape[0])]))
        rows = [(k, str(names[i]), float(A[i, k])) for k in range(A.shape[1])
                for i in np.argsort(-np.abs(A[:, k])) if abs(A[i, k]) > threshold]
        return pd.DataFrame(rows, columns=["factor", "feature", "loading"])


@dataclass(frozen=True, kw_only=True)
class FactorMethod(Method):
    """An inference method of :class:`FactorBSVM` (:data:`FACTOR_METHODS`): the :class:`Method` fields, and

    Attributes
    ----------
    two_stage : bool
        Whether it fits ``joint=False`` (the factor model alone, then a classifier: FM+L / FM+N).
    probit : bool
        Whether it fits ``link="probit"`` (jointly, without a second stage).
    dense : bool
        Whether it holds N x N matrices whatever the classifier (:data:`DENSE_BUFFERS` of them).
    """

    two_stage: bool = False
    probit: bool = False
    dense: bool = False


#: The inference methods of :class:`FactorBSVM`; each fit step returns the draws its mixing check judges
#: (None for VB-EM, whose draws are of the approximation).
FACTOR_METHODS: Registry[FactorMethod] = Registry(
    FactorMethod(name="gibbs", fit=FactorBSVM._fit_gibbs, samples=True, checkpoints=True, two_stage=True,
                 probit=True),
    FactorMethod(name="vbem", fit=FactorBSVM._fit_vbem, checkpoints=True, dense=True,
                 approximation="q(A) q(psi) q(gamma) of VB-EM"),
)
FactorBSVM._METHODS = FACTOR_METHODS


def _posterior_from_attributes(state: dict[str, Any], est: FactorBSVM) -> dict[str, Any]:
    """The typed posterior of a file written before there were typed posteriors (``_structure`` with
    ``_draws`` or ``_vb``, and ``_y``)."""
    state = dict(state)
    structure, y = state.pop("_structure"), state.pop("_y")
    if structure.startswith("vb"):
        vb_state, like = state.pop("_vb")
        state["_posterior"] = VBPosterior(vb_state, like, y, est._vb_kernel())
    else:
        gp = structure == "gp"
        state["_posterior"] = DrawsPosterior(state.pop("_draws"), structure, y, est.kernel if gp else None,
                                             est._theta() if gp else None)
    return state


def _gamma_draws(rng: np.random.Generator, shape: Any, rate: Any, size: tuple[int, int]) -> np.ndarray:
    """Draws (chain, draw, ...) of Gamma(shape, rate), the parameters broadcast against each other."""
    shape, rate = np.asarray(shape, dtype=np.float64), np.asarray(rate, dtype=np.float64)
    return rng.gamma(shape, 1.0 / rate, (*size, *np.broadcast_shapes(shape.shape, rate.shape)))
