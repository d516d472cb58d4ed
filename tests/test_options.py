"""Every documented option of every estimator, one at a time and in the combinations the docs show:
fit -> predict -> predict_proba -> save -> load -> predict gives the same predictions.

Each inference method of each estimator has a base setting (the documented defaults, with the run
lengths cut to the smallest that still run every step: ML-II rounds, warm-up and kept draws, chains).
The cases are the base, the base with one option changed to each of its documented values
(``ALONE``), the combinations written in ``docs/`` and the docstrings (``DOCUMENTED``), and these in
three classes (the one-vs-rest wrappers, ``MULTICLASS``); ``-m extended`` adds the cartesian product
of the options that change what a fit stores or which program it runs (``AXES``), where a combination
the estimator refuses must fail with :class:`InvalidParameterError`. Documented values that some
inference method refuses must be refused clearly (``REFUSED``).

Every case compiles its own programs where an option changes them (a GP or factor-model sampler
takes 5-20 s on two cores; all cases 20 minutes of CPU), so the default suite runs the cases of
``DEFAULT_RUN`` (about a minute): on the cheapest inference method of each family the options that
change what is saved (random_state forms, kernel objects, the Luts & Ormerod models' extra
attributes, second stages), and every case that found a bug. The rest run with ``-m extended``. All
cases share one small data set, so that a program compiled for one serves every later case of the
same shapes.
"""

from __future__ import annotations

import itertools
import json
import warnings
from typing import Any, NamedTuple

import jax
import numpy as np
import optax
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection
from bayes_maxmargin.core.checks import InvalidParameterError
from bayes_maxmargin.kernels import ARD, RBF, Constant, Linear, Polynomial

from ._saved_files import forge, state_node, unzip

pytestmark = pytest.mark.xdist_group("options")

# ------------------------------------------------------------------ the shared problem
_rng = np.random.default_rng(0)
N_ROWS, N_NEW = 36, 5
X = _rng.normal(size=(N_ROWS, 3))
#: two classes, overlapping (string labels: the label encoder round-trips too)
Y2 = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.5 * _rng.normal(size=N_ROWS) > 0, "yes", "no")
#: three classes by the angle in the first two features, 12 rows each
Y3 = np.array(["ant", "bee", "cat"])[np.argsort(np.argsort(np.arctan2(X[:, 1], X[:, 0]))) * 3 // N_ROWS]
X_NEW = _rng.normal(size=(N_NEW, 3))
#: X with missing cells for ``missing="model"`` (no row or column entirely missing); new rows with one too
X_NAN = X.copy()
X_NAN[[1, 5, 9, 14, 22], [0, 1, 2, 0, 1]] = np.nan
X_NEW_NAN = X_NEW.copy()
X_NEW_NAN[0, 1] = np.nan
GROUPS = np.arange(N_ROWS) % 4

# ------------------------------------------------------------------ base settings
QUIET = dict(progress_bar=False, random_state=0)
#: the shortest MCMC run that still has warm-up, more than one kept draw and more than one chain
MCMC = dict(num_samples=3, num_warmup=2, num_chains=2, **QUIET)
#: NUTS: a warm-up long enough to adapt a step size at which not every transition diverges
NUTS = {**MCMC, "num_warmup": 20}
#: ECM / FITC: four iterations with an ML-II round of one optimiser step after every second
ML2 = dict(max_iter=4, mlii_every=2, mlii_steps=1, **QUIET)

BASES: dict[str, tuple[type, dict[str, Any]]] = {
    "linear-gibbs": (LinearBSVM, dict(inference="gibbs", **MCMC)),
    "linear-em": (LinearBSVM, dict(inference="em", max_iter=5, **QUIET)),
    "linear-nuts": (LinearBSVM, dict(inference="nuts", **NUTS)),
    "linear-vb": (LinearBSVM, dict(inference="vb", max_iter=5, **QUIET)),
    "linear-svi": (LinearBSVM, dict(inference="svi", batch_size=12, max_iter=4, **QUIET)),
    "gp-ecm": (GPBSVM, dict(inference="ecm", **ML2)),
    "gp-fitc": (GPBSVM, dict(inference="fitc", num_inducing=4, **ML2)),
    "gp-gibbs": (GPBSVM, dict(inference="gibbs", **MCMC)),
    "gp-nuts": (GPBSVM, dict(inference="nuts", **NUTS)),
    "gp-vi": (GPBSVM, dict(inference="vi", max_iter=3, **QUIET)),
    # svi at its defaults: min(64, N // 3) inducing points and min(100, N) rows a step; ten steps, two of
    # them followed by ML-II (mlii_every=5)
    "gp-svi": (GPBSVM, dict(inference="svi", max_iter=10, **QUIET)),
    # GPBSVM() on these few rows: ECM with the link cross-fitted from five refits
    "gp-default": (GPBSVM, dict(**ML2)),
    # the paper's Table 3 (FactorBSVM's docstring), two factors of the three features
    "factor-ldfm": (FactorBSVM, dict(n_factors=2, classifier="linear", num_warmup=2, num_samples=3, thin=1, **QUIET)),
    "factor-ndfm": (FactorBSVM, dict(n_factors=2, classifier="gp", num_warmup=2, num_samples=3, thin=1, **QUIET)),
    "factor-vldfm": (FactorBSVM, dict(n_factors=2, classifier="linear", inference="vbem", max_iter=2, m_steps=1,
                                      **QUIET)),
    "factor-vndfm": (FactorBSVM, dict(n_factors=2, classifier="gp", inference="vbem", max_iter=2, m_steps=1,
                                      **QUIET)),
    "projection-mmldp": (MaxMarginProjection, dict(num_warmup=2, num_samples=3, **QUIET)),
    "projection-kmmdp": (MaxMarginProjection, dict(kernel="rbf", n_basis=8, num_warmup=2, num_samples=3, **QUIET)),
    "projection-sskmmdp": (MaxMarginProjection, dict(kernel="rbf", n_basis=8, spike_slab=True, num_warmup=2,
                                                     num_samples=3, **QUIET)),
}


def _schedule(t):
    """A step-size schedule t -> rho_t (``step_size`` takes any callable)."""
    return optax.exponential_decay(0.5, 10, 0.5)(t)


class Value(NamedTuple):
    """An option value and its name in the test ids (``value`` a callable: a fresh object per fit)."""

    name: str
    value: Any

    def get(self) -> Any:
        return self.value() if callable(self.value) and not isinstance(self.value, type) else self.value


def _v(value: Any) -> Value:
    return value if isinstance(value, Value) else Value(repr(value).replace(" ", ""), value)


# documented values that are objects (made fresh for every fit: estimators must not share them)
RANDOM_STATES = [_v(None), Value("RandomState", lambda: np.random.RandomState(0)),
                 Value("key", lambda: jax.random.key(0)), Value("PRNGKey", lambda: jax.random.PRNGKey(0))]
SCHEDULE = Value("schedule", lambda: _schedule)
RBF_LINEAR = Value("RBF+Linear", lambda: RBF() + Linear())
MKL = Value("0.5RBF+0.5Poly", lambda: 0.5 * RBF() + 0.5 * Polynomial())
RBF_X_POLY = Value("RBFxPoly", lambda: RBF() * Polynomial())
ARD_CONST = Value("ARD+Constant", lambda: ARD() + Constant())

#: Values of parameters that the file format cannot hold: the fit works, ``save`` refuses with a
#: TypeError naming the parameter.
UNSAVEABLE = {"random_state": ("RandomState",), "step_size": ("schedule",)}

# ------------------------------------------------------------------ one option at a time
_LINEAR = dict(sigma=[2.0], intercept_scale=[None, 3.0], fit_intercept=[False], precision=["float32"],
               progress_bar=[True], random_state=RANDOM_STATES)
_LINEAR_HINGE = dict(gamma=[2.0], gamma_prior=[(2.0, 1.0)], gamma0=[0.1])
_MCMC = dict(thin=[2])
_LUTS = dict(prior=["penalty", "laplace_zero"], A_u=[0.1], B_u=[0.1])
_GP = dict(kernel=["rbf", "ard", "poly", "linear", RBF_LINEAR], kernel_params=[{"lengthscale": 1.5}],
           gamma=[2.0], jitter=[1e-5], precision=["float32"], progress_bar=[True], random_state=RANDOM_STATES)
_GP_LEARN = dict(learn_kernel=[False, ("lengthscale",)])
_GP_SAMPLED = dict(gamma_prior=[(2.0, 1.0)], gamma0=[0.0], kernel_prior_scale=[0.5], **_MCMC)
_GP_ML2 = dict(gamma_prior=[(2.0, 1.0)], gamma0=[0.1], optimizer=["adam"], learning_rate=[0.1], tol=[1e-6],
               accelerate=[False], calibrate=[False])
_INDUCING = dict(num_inducing=[3], inducing=["random"])
_SVI_STEPS = dict(step_size=["adaptive", 0.5, SCHEDULE], devices=[1])
_FACTOR = dict(nu=[2.0], psi_prior=[(2.0, 2.0)], gamma=[2.0], gamma_prior=[None], precision=["float32"],
               progress_bar=[True], random_state=RANDOM_STATES)
_FACTOR_GIBBS = dict(gamma0=[0.0], num_chains=[2], thin=[2])
_FACTOR_GP = dict(kernel=["ard", RBF_LINEAR], kernel_params=[{"lengthscale": 1.5}])
_PROJECTION = dict(n_components=[2], a0=[2.0], b0=[2.0], c0=[2.0], d0=[2.0], precision=["float32"],
                   progress_bar=[True], random_state=RANDOM_STATES, num_chains=[2], thin=[2])
_PROJECTION_KERNEL = dict(n_basis=[5], basis=["random"], kernel_params=[{"lengthscale": 1.5}])

ALONE: dict[str, dict[str, list]] = {
    "linear-gibbs": {**_LINEAR, **_LINEAR_HINGE, **_MCMC, **_LUTS, "overrelaxation": [0.0],
                     "gamma0_prior": [(2.0, 4.0)], "marginal_moves": [False]},
    "linear-em": {**_LINEAR, **_LINEAR_HINGE, "solver": ["fixed_point"], "tol": [1e-6]},
    "linear-nuts": {**_LINEAR, **_LINEAR_HINGE, **_MCMC},
    "linear-vb": {**_LINEAR, **_LUTS, "accelerate": [False], "tol": [1e-6]},
    "linear-svi": {**_LINEAR, "intercept_scale": [3.0], "gamma": [2.0], **_SVI_STEPS},
    "gp-ecm": {**_GP, **_GP_LEARN, **_GP_ML2, "mlii_tol": [None, 1e-3], "solver": ["fixed_point"],
               "mlii_criterion": ["loo"], "calibrate": [False, "cv"]},
    "gp-fitc": {**_GP, **_GP_LEARN, **_GP_ML2, **_INDUCING, "mlii_tol": [1e-3], "optimize_inducing": [False],
                "mlii_criterion": ["loo"]},
    "gp-gibbs": {**_GP, **_GP_LEARN, **_GP_SAMPLED, "gamma0_prior": [(2.0, 4.0)], "theta_sampler": ["surrogate"],
                 "marginal_moves": [False], "calibrate": ["cv"]},
    "gp-nuts": {**_GP, **_GP_LEARN, **_GP_SAMPLED},
    "gp-vi": {**_GP, "calibrate": [False]},
    "gp-default": {"calibrate": [True], "inference": ["svi"]},
    "gp-svi": {**_GP, **_GP_LEARN, **_INDUCING, **_SVI_STEPS, "kernel": ["rbf", "ard", "poly", "linear", RBF_LINEAR,
                                                                        ARD_CONST],
               "precision": ["float64"], "calibrate": [False], "optimize_inducing": [True], "batch_size": [12],
               "mlii_every": [2], "learning_rate": [0.1]},
    "factor-ldfm": {**_FACTOR, **_FACTOR_GIBBS, "rho": [1.0], "intercept_scale": [2.0]},
    "factor-ndfm": {**_FACTOR, **_FACTOR_GIBBS, **_FACTOR_GP, "n_blocks": [None, 2], "learn_kernel": [("lengthscale",)],
                    "kernel_prior_scale": [0.5]},
    "factor-vldfm": {**_FACTOR, "m_steps": [2]},
    "factor-vndfm": {**_FACTOR, **_FACTOR_GP, "learn_kernel": [False, True]},
    "projection-mmldp": {**_PROJECTION, "latent_representation": [False]},
    "projection-kmmdp": {**_PROJECTION, **_PROJECTION_KERNEL, "kernel": ["poly"], "latent_representation": [False]},
    "projection-sskmmdp": {**_PROJECTION, **_PROJECTION_KERNEL, "dense_warmup": [0, 2], "e0": [2.0], "f0": [2.0]},
}


class Case(NamedTuple):
    """One fit: estimator class and parameters (``Value`` entries made fresh), fit arguments, data."""

    cls: type
    params: dict[str, Any]
    fit_args: dict[str, Any] = {}
    X: np.ndarray = X
    X_new: np.ndarray = X_NEW
    y: np.ndarray = Y2

    def estimator(self) -> Any:
        return self.cls(**{k: v.get() if isinstance(v, Value) else v for k, v in self.params.items()})


def _alone_cases() -> dict[str, Case]:
    cases = {}
    for base, (cls, params) in BASES.items():
        cases[base] = Case(cls, params)
        for name, values in ALONE[base].items():
            for value in map(_v, values):
                cases[f"{base}-{name}={value.name}"] = Case(cls, {**params, name: value})
    return cases


_LUTS_FIT = dict(X=X_NAN, X_new=X_NEW_NAN)
#: The combinations the docs and docstrings write out, on the base of their inference method (run
#: lengths kept short).
DOCUMENTED: dict[str, Case] = {
    # docs/user_guide/linear.md
    "linear-gibbs-skewed": Case(LinearBSVM, {**BASES["linear-gibbs"][1], "gamma0": 0.1, "gamma_prior": (2.0, 1.0)}),
    "linear-em-svm": Case(LinearBSVM, {**BASES["linear-em"][1], "sigma": 1e4, "intercept_scale": None}),
    "linear-em-ecm": Case(LinearBSVM, {**BASES["linear-em"][1], "gamma_prior": (2.0, 1.0)}),
    # docs/user_guide/luts.md: every model under VB and under Gibbs
    **{f"linear-{inf}-{name}": Case(LinearBSVM, {**BASES[f"linear-{inf}"][1], **extra}, **fit)
       for inf in ("vb", "gibbs")
       for name, extra, fit in (
           ("laplace_zero-rho", dict(prior="laplace_zero", rho=0.01), {}),
           ("groups", {}, dict(fit_args=dict(groups=GROUPS))),
           ("penalty-missing", dict(prior="penalty", missing="model"), _LUTS_FIT),
           ("penalty-missing-flat", dict(prior="penalty", missing="model", intercept_scale=None), _LUTS_FIT),
           ("laplace_zero-flat", dict(prior="laplace_zero", rho=0.01, intercept_scale=None, A_u=0.01, B_u=0.01), {}),
       )},
    # docs/user_guide/gp.md: part of the kernel learnt (sampled, or by ML-II) and the rest fixed, by field
    # name and by path in a composed kernel; the composed kernels it shows
    **{f"gp-{inf}-{name}": Case(GPBSVM, {**BASES[f"gp-{inf}"][1], **extra})
       for inf in ("ecm", "fitc", "gibbs", "nuts", "svi")
       for name, extra in (
           ("ard-lengthscales", dict(kernel="ard", learn_kernel=("lengthscales",))),
           ("composed-path", dict(kernel=RBF_LINEAR, learn_kernel=("k1__lengthscale",))),
       )},
    **{f"gp-{inf}-{name}": Case(GPBSVM, {**BASES[f"gp-{inf}"][1], "kernel": kernel})
       for inf in ("ecm", "svi") for name, kernel in (("mkl", MKL), ("product", RBF_X_POLY))},
    "gp-ecm-fixed-kernel": Case(GPBSVM, {**BASES["gp-ecm"][1], "learn_kernel": False, "max_iter": 20}),
    "gp-svi-calibrated-float64": Case(GPBSVM, {**BASES["gp-svi"][1], "num_inducing": 4, "precision": "float64",
                                               "calibrate": True}),
    # FactorBSVM's Table 3: the two-stage and second-stage variants
    "factor-fm+l": Case(FactorBSVM, {**BASES["factor-ldfm"][1], "joint": False}),
    "factor-fm+n": Case(FactorBSVM, {**BASES["factor-ndfm"][1], "joint": False}),
    "factor-ldfm+n": Case(FactorBSVM, {**BASES["factor-ldfm"][1], "second_stage": "gp"}),
    "factor-vldfm+n": Case(FactorBSVM, {**BASES["factor-vldfm"][1], "second_stage": "gp"}),
    "factor-ldfm+l": Case(FactorBSVM, {**BASES["factor-ldfm"][1], "second_stage": "linear"}),
    # docs/user_guide/projection.md
    "projection-kmmdp-poly-params": Case(MaxMarginProjection, {**BASES["projection-kmmdp"][1], "kernel": "poly",
                                                               "kernel_params": {"degree": 3, "offset": 0.5}}),
}

#: Every base in three classes (the one-vs-rest wrappers), and the documented combinations that store
#: more than the base (groups, imputation, sampled kernel fields) in three classes too.
MULTICLASS: dict[str, Case] = {
    **{f"{name}-3class": Case(cls, params, y=Y3) for name, (cls, params) in BASES.items()},
    **{f"{name}-3class": DOCUMENTED[name]._replace(y=Y3)
       for name in ("linear-vb-groups", "linear-gibbs-penalty-missing", "gp-gibbs-composed-path",
                    "gp-nuts-composed-path", "factor-ldfm+n")},
}

# ------------------------------------------------------------------ the cartesian product (extended)
#: Per base, the options that change what a fit stores or which program it runs, with their
#: documented values (the first the base's); their product is fitted under -m extended.
AXES: dict[str, dict[str, list]] = {
    "linear-gibbs": dict(prior=["gaussian", "penalty", "laplace_zero"], gamma_prior=[None, (2.0, 1.0)],
                         gamma0=[0.0, 0.1], intercept_scale=[10.0, None], fit_intercept=[True, False],
                         precision=["float64", "float32"]),
    "linear-em": dict(gamma_prior=[None, (2.0, 1.0)], gamma0=[0.0, 0.1], intercept_scale=[10.0, None],
                      fit_intercept=[True, False], precision=["float64", "float32"]),
    "linear-nuts": dict(gamma_prior=[None, (2.0, 1.0)], gamma0=[0.0, 0.1], intercept_scale=[10.0, None],
                        fit_intercept=[True, False], precision=["float64", "float32"]),
    "linear-vb": dict(prior=["gaussian", "penalty", "laplace_zero"], intercept_scale=[10.0, None],
                      fit_intercept=[True, False], precision=["float64", "float32"]),
    "linear-svi": dict(fit_intercept=[True, False], precision=["float64", "float32"]),
    "gp-ecm": dict(kernel=[None, "ard", RBF_LINEAR], learn_kernel=[True, False, ("lengthscale",)],
                   gamma_prior=[None, (2.0, 1.0)], gamma0=[None, 0.1], precision=["float64", "float32"]),
    "gp-fitc": dict(kernel=[None, "ard", RBF_LINEAR], learn_kernel=[True, False, ("lengthscale",)],
                    gamma_prior=[None, (2.0, 1.0)], gamma0=[None, 0.1], precision=["float64", "float32"]),
    "gp-gibbs": dict(kernel=[None, "ard", RBF_LINEAR], learn_kernel=[True, False, ("lengthscale",)],
                     gamma_prior=[None, (2.0, 1.0)], gamma0=[None, 0.0], precision=["float64", "float32"]),
    "gp-nuts": dict(kernel=[None, "ard", RBF_LINEAR], learn_kernel=[True, False, ("lengthscale",)],
                    gamma_prior=[None, (2.0, 1.0)], gamma0=[None, 0.0], precision=["float64", "float32"]),
    "gp-vi": dict(kernel=[None, "ard", RBF_LINEAR], calibrate=[None, False], precision=["float64", "float32"]),
    "gp-svi": dict(kernel=[None, "ard", RBF_LINEAR, ARD_CONST], learn_kernel=[True, False, ("lengthscale",)],
                   optimize_inducing=[None, True], precision=[None, "float64"]),
    "factor-ldfm": dict(joint=[True, False], second_stage=[None, "linear", "gp"], gamma_prior=[(1.0, 1.0), None],
                        rho=[None, 1.0], precision=["float64", "float32"]),
    "factor-ndfm": dict(joint=[True, False], second_stage=[None, "linear", "gp"], kernel=["rbf", "ard"],
                        precision=["float64", "float32"]),
    "factor-vldfm": dict(second_stage=[None, "linear", "gp"], gamma_prior=[(1.0, 1.0), None],
                         precision=["float64", "float32"]),
    "factor-vndfm": dict(second_stage=[None, "linear", "gp"], kernel=["rbf", "ard", RBF_LINEAR],
                         precision=["float64", "float32"]),
    "projection-mmldp": dict(kernel=[None, "rbf", "poly"], spike_slab=[False, True], n_components=[None, 2],
                             precision=["float64", "float32"], latent_representation=[True, False]),
}


def _product_cases() -> dict[str, Case]:
    cases = {}
    for base, axes in AXES.items():
        cls, params = BASES[base]
        for values in itertools.product(*([_v(v) for v in vs] for vs in axes.values())):
            changed = {k: v for k, v, vs in zip(axes, values, axes.values()) if v.name != _v(vs[0]).name}
            if len(changed) < 2:  # the base and single options are in the default suite
                continue
            name = "-".join(f"{k}={v.name}" for k, v in changed.items())
            cases[f"{base}-{name}"] = Case(cls, {**params, **changed})
    return cases


CASES = {**_alone_cases(), **DOCUMENTED, **MULTICLASS}
EXTENDED_CASES = {k: v for k, v in _product_cases().items() if k not in CASES}

_SAVED_FORMS = ("random_state=None", "random_state=RandomState", "random_state=key", "random_state=PRNGKey")
#: The cases of the default suite (the rest run with -m extended; measured: the module's default run
#: takes about a minute on two cores, every case of CASES twenty minutes of CPU). Options that change
#: only a number of the fit share its program and cost the fit alone: on a base that runs anyway they
#: are all here.
DEFAULT_RUN = (
    # LinearBSVM: EM (its numbers, the random_state forms, the hinge's options), the default Gibbs sampler,
    # VB with each Luts & Ormerod model (groups_, random_effects_, inclusion_probabilities_, imputation_*),
    # svi with each step-size form; one one-vs-rest fit
    "linear-em", *(f"linear-em-{o}" for o in ("sigma=2.0", "intercept_scale=None", "intercept_scale=3.0", "gamma=2.0",
                                                "tol=1e-06", "solver='fixed_point'", "gamma_prior=(2.0,1.0)",
                                                "gamma0=0.1", *_SAVED_FORMS)),
    "linear-em-svm", "linear-em-ecm", "linear-em-3class",
    "linear-gibbs", *(f"linear-gibbs-{o}" for o in ("sigma=2.0", "intercept_scale=None", "gamma=2.0", "A_u=0.1",
                                                      "B_u=0.1", "random_state=None", "random_state=RandomState")),
    "linear-vb", *(f"linear-vb-{o}" for o in ("sigma=2.0", "intercept_scale=None", "tol=1e-06", "A_u=0.1", "B_u=0.1",
                                                "laplace_zero-rho", "groups", "penalty-missing", "penalty-missing-flat",
                                                "laplace_zero-flat", "random_state=None")),
    "linear-svi", *(f"linear-svi-{o}" for o in ("sigma=2.0", "gamma=2.0", "intercept_scale=3.0", "step_size=0.5",
                                                  "step_size='adaptive'", "step_size=schedule", "devices=1",
                                                  "random_state=RandomState")),
    # GPBSVM: Gibbs with part of the kernel sampled (prediction combines the sampled field's draws with the
    # fixed one); VI, the cheapest full GP, with every kernel name and object (the file holds the kernel)
    # and without the learnt link. (theta_sampler='surrogate', extended: its fit stores what the collapsed
    # sampler's stores, the kernel field's draws, round-tripped by learn_kernel=('lengthscale',) here; the
    # sampler itself runs in tests/test_gp_theta.py::test_gibbs_with_theta_agrees_with_nuts, the option's
    # save and load in tests/test_persistence.py::test_theta_sampler_saves_and_files_without_it_load)
    "gp-gibbs-learn_kernel=('lengthscale',)",
    "gp-vi", *(f"gp-vi-{o}" for o in ("kernel='rbf'", "kernel='ard'", "kernel='poly'", "kernel='linear'",
                                        "kernel=RBF+Linear", "kernel_params={'lengthscale':1.5}", "gamma=2.0",
                                        "calibrate=False", *_SAVED_FORMS)),
    # FactorBSVM: VB-EM, and with a second-stage GP (the file holds the second stage too); its numbers
    "factor-vldfm", "factor-vldfm+n", *(f"factor-vldfm-{o}" for o in ("nu=2.0", "psi_prior=(2.0,2.0)", "gamma=2.0",
                                                                      "gamma_prior=None", "random_state=None")),
    # MaxMarginProjection: MMLDP and its numbers (latent_representation=False, extended: fitted, saved, loaded
    # and predicting identically in test_persistence.py::test_projection_option_saves_and_files_without_it_load)
    "projection-mmldp", *(f"projection-mmldp-{o}" for o in ("a0=2.0", "b0=2.0", "c0=2.0", "d0=2.0",
                                                             "random_state=None", "random_state=RandomState")),
)
_unknown = sorted(set(DEFAULT_RUN) - set(CASES))
assert not _unknown, f"DEFAULT_RUN names unknown cases: {_unknown}"

#: Documented values that an inference method or model refuses, with what the error names.
REFUSED: dict[str, tuple[Case, str]] = {
    # a flat intercept prior: svi's ELBO needs a proper prior on every coefficient
    "linear-svi-intercept_scale=None": (Case(LinearBSVM, {**BASES["linear-svi"][1], "intercept_scale": None}),
                                        "intercept_scale"),
    # the random-intercept model has Gaussian fixed effects (Luts & Ormerod 2014, Example 2)
    "linear-vb-penalty-groups": (Case(LinearBSVM, {**BASES["linear-vb"][1], "prior": "penalty"},
                                      fit_args=dict(groups=GROUPS)), "prior"),
    "linear-gibbs-penalty-groups": (Case(LinearBSVM, {**BASES["linear-gibbs"][1], "prior": "penalty"},
                                         fit_args=dict(groups=GROUPS)), "prior"),
    # the Luts & Ormerod models use the unit hinge
    "linear-vb-gamma_prior": (Case(LinearBSVM, {**BASES["linear-vb"][1], "gamma_prior": (2.0, 1.0)}), "gamma_prior"),
    "linear-svi-gamma0": (Case(LinearBSVM, {**BASES["linear-svi"][1], "gamma0": 0.1}), "gamma0"),
    "linear-em-missing": (Case(LinearBSVM, {**BASES["linear-em"][1], "prior": "penalty", "missing": "model"},
                               **_LUTS_FIT), "inference"),
    "linear-gibbs-missing-gaussian": (Case(LinearBSVM, {**BASES["linear-gibbs"][1], "missing": "model"}, **_LUTS_FIT),
                                      "missing"),
    # vi and svi fit the hinge with gamma fixed; Gibbs and NUTS have no leave-one-out moments for a link
    "gp-vi-gamma0": (Case(GPBSVM, {**BASES["gp-vi"][1], "gamma0": 0.1}), "gamma0"),
    "gp-svi-gamma_prior": (Case(GPBSVM, {**BASES["gp-svi"][1], "gamma_prior": (2.0, 1.0)}), "gamma_prior"),
    "gp-gibbs-calibrate": (Case(GPBSVM, {**BASES["gp-gibbs"][1], "calibrate": True}), "calibrate"),
    "gp-gibbs-theta_sampler": (Case(GPBSVM, {**BASES["gp-gibbs"][1], "theta_sampler": "elliptical"}), "theta_sampler"),
    "gp-gibbs-marginal_moves": (Case(GPBSVM, {**BASES["gp-gibbs"][1], "marginal_moves": "yes"}), "marginal_moves"),
    "gp-ecm-gamma_prior-mode": (Case(GPBSVM, {**BASES["gp-ecm"][1], "gamma_prior": (1.0, 1.0)}), "gamma_prior"),
    # gamma0 is sampled by Gibbs only
    "linear-nuts-gamma0_prior": (Case(LinearBSVM, {**BASES["linear-nuts"][1], "gamma0_prior": (2.0, 4.0)}),
                                 "gamma0_prior"),
    "gp-ecm-gamma0_prior": (Case(GPBSVM, {**BASES["gp-ecm"][1], "gamma0_prior": (2.0, 4.0)}), "gamma0_prior"),
    # the two-stage factor model is fitted by Gibbs
    "factor-vbem-two-stage": (Case(FactorBSVM, {**BASES["factor-vldfm"][1], "joint": False}), "joint"),
    "factor-n_factors": (Case(FactorBSVM, {**BASES["factor-vldfm"][1], "n_factors": 4}), "n_factors"),
    # the linear classifier has no kernel to learn
    "factor-ldfm-learn_kernel": (Case(FactorBSVM, {**BASES["factor-ldfm"][1], "learn_kernel": True}), "learn_kernel"),
    # the spike-and-slab step draws Theta given the latent features (Chen et al. 2015, eq. 22)
    "projection-sskmmdp-latent_representation=False": (
        Case(MaxMarginProjection, {**BASES["projection-sskmmdp"][1], "latent_representation": False}),
        "latent_representation"),
}


# ------------------------------------------------------------------ the check
def _outputs(est: Any, X_new: np.ndarray, fit_args: dict[str, Any]) -> dict[str, np.ndarray]:
    """predict, predict_proba (where the estimator has it), decision_function and transform at X_new."""
    extra = {"groups": np.arange(N_NEW) % 5} if "groups" in fit_args else {}  # group 4 is unseen
    return {method: np.asarray(getattr(est, method)(X_new, **(extra if method != "transform" else {})))
            for method in ("predict", "predict_proba", "decision_function", "transform") if hasattr(est, method)}


def _check_round_trip(case: Case, tmp_path, refusable: bool = False) -> None:
    """Fit, predict, save, load and predict again; ``refusable``: a fit refused with
    InvalidParameterError ends the check."""
    est = case.estimator()
    with warnings.catch_warnings():
        # run lengths far too short to converge or mix: ConvergenceWarning and the mixing warnings
        warnings.simplefilter("ignore")
        try:
            est.fit(case.X, case.y, **case.fit_args)
        except InvalidParameterError:
            if refusable:
                return
            raise
    classes = np.unique(case.y)
    np.testing.assert_array_equal(est.classes_, classes)
    out = _outputs(est, case.X_new, case.fit_args)
    assert out["predict"].shape == (N_NEW,) and set(out["predict"]) <= set(classes)
    if "predict_proba" in out:
        proba = out["predict_proba"]
        assert proba.shape == (N_NEW, classes.size) and np.all((proba >= 0) & (proba <= 1))
        # K probabilities normalised by one division each: their sum is 1 to K roundings
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=classes.size * np.finfo(proba.dtype).eps)
    unsaveable = [k for k, names in UNSAVEABLE.items()
                  if isinstance(case.params.get(k), Value) and case.params[k].name in names]
    if unsaveable:
        with pytest.raises(TypeError, match=f"cannot save parameter '{unsaveable[0]}'"):
            bmm.save(est, tmp_path / "m.bmm")
        return
    back = bmm.load(bmm.save(est, tmp_path / "m.bmm"))
    assert type(back) is type(est)
    np.testing.assert_array_equal(back.classes_, est.classes_)
    # The same code on the same arrays in the same process: a loaded fit predicts bit for bit as the
    # saved one, so the comparison is exact.
    for method, value in _outputs(back, case.X_new, case.fit_args).items():
        np.testing.assert_array_equal(value, out[method], err_msg=method)


@pytest.mark.parametrize("name", [name if name in DEFAULT_RUN else pytest.param(name, marks=pytest.mark.extended)
                                  for name in CASES])
def test_option_round_trips(name, tmp_path):
    _check_round_trip(CASES[name], tmp_path)


@pytest.mark.extended
@pytest.mark.parametrize("name", list(EXTENDED_CASES))
def test_option_combination_round_trips(name, tmp_path):
    """A combination is either refused with InvalidParameterError at fit or fits, predicts and
    round-trips as the single options do."""
    _check_round_trip(EXTENDED_CASES[name], tmp_path, refusable=True)


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_option_is_named(name):
    case, option = REFUSED[name]
    with pytest.raises(InvalidParameterError, match=option):
        case.estimator().fit(case.X, case.y, **case.fit_args)


def _stage2_edit(change):
    def edit(manifest):
        change(state_node(manifest, "_stage2"))
    return edit


@pytest.mark.parametrize("change, message", [
    (lambda node: node["__dict__"][1][1]["__dict__"].append(["predict", 1.0]), "sets 'predict', which is a method"),
    (lambda node: node["__dict__"].pop(0), "malformed second stage"),
], ids=["shadows-a-method", "without-params"])
def test_second_stage_of_a_file_is_checked(change, message, tmp_path):
    """The second stage of a FactorBSVM is saved as its parameters and state: a file whose second stage
    sets a method's name or lacks its parameters (checksums renewed) is refused as the one-vs-rest
    estimators are."""
    case = CASES["factor-vldfm+n"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = case.estimator().fit(case.X, case.y)
    data = bmm.save(est, tmp_path / "m.bmm").read_bytes()
    assert [k for k, _ in state_node(json.loads(unzip(data)[0]["manifest.json"]), "_stage2")["__dict__"]] == [
        "params", "state"]
    (tmp_path / "forged.bmm").write_bytes(forge(data, _stage2_edit(change)))
    with pytest.raises(bmm.InvalidModelFileError, match=message):
        bmm.load(tmp_path / "forged.bmm")
