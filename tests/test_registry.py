"""The registries of inference methods (:mod:`bayes_maxmargin.estimators.registry`): each family's estimator
takes its methods, their defaults and capabilities from one registry, and a fitted posterior has the type
its method names (the posterior contract, :mod:`bayes_maxmargin.core.posterior`)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bayes_maxmargin import FactorBSVM, GPBSVM, LinearBSVM
from bayes_maxmargin.core.posterior import LeaveOneOut, Posterior
from bayes_maxmargin.core.checks import InvalidParameterError
from bayes_maxmargin.estimators.factor import FACTOR_METHODS
from bayes_maxmargin.estimators.gp import GP_METHODS
from bayes_maxmargin.estimators.linear import LINEAR_METHODS
from bayes_maxmargin.estimators.registry import Method, Registry

ESTIMATORS = Path(__file__).parents[1] / "bayes_maxmargin" / "estimators"


def test_a_registry_checks_names_and_lists_capabilities():
    """check() returns the method or names the parameter, the value and the choices in order; names()
    filters by a capability; two methods may not share a name."""
    a, b = Method(name="a", fit=print, samples=True), Method(name="b", fit=print)
    reg = Registry(a, b)
    assert reg.check("b") is b and list(reg) == ["a", "b"] and len(reg) == 2
    assert reg.names(lambda m: m.samples) == ("a",) and reg.lookup(3) is None and reg.lookup("c") is None
    with pytest.raises(InvalidParameterError, match=r"^Invalid value for inference: 'c'; valid options are 'a', 'b'$"):
        reg.check("c")
    with pytest.raises(ValueError, match="share a name"):
        Registry(a, a)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.samples = False


@pytest.mark.parametrize(("estimator", "registry", "checkpointed"), [
    (GPBSVM, GP_METHODS, {"ecm", "fitc", "gibbs", "nuts", "vi", "svi"}),
    (LinearBSVM, LINEAR_METHODS, {"em", "gibbs", "nuts", "vb", "svi"}),
    (FactorBSVM, FACTOR_METHODS, {"gibbs", "vbem"}),
])
def test_each_family_takes_its_methods_from_its_registry(estimator, registry, checkpointed):
    """The estimator's registry is the module's; every method's fit step is the estimator's, and the methods
    that take checkpoints are those each family has always checkpointed."""
    assert estimator._METHODS is registry
    assert set(estimator._checkpointed()) == checkpointed
    for method in registry.values():
        assert getattr(estimator, method.fit.__name__) is method.fit


def test_no_estimator_branches_on_an_inference_name():
    """Outside the registry entries no estimator compares ``inference`` (or the method's name) with a
    literal: ``== "ecm"``, ``in ("gibbs", "nuts")`` and the like ask the method's capabilities instead."""
    names = set(GP_METHODS) | set(LINEAR_METHODS) | set(FACTOR_METHODS)
    found = []
    for path in sorted(ESTIMATORS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            literals = [c for c in [node.left, *node.comparators] if isinstance(c, (ast.Constant, ast.Tuple))]
            values = {e.value for lit in literals for e in (lit.elts if isinstance(lit, ast.Tuple) else [lit])
                      if isinstance(e, ast.Constant)}
            if values & names:
                found.append(f"{path.name}:{node.lineno}")
    assert not found, f"comparisons with inference names: {found}"


def test_gp_capabilities_follow_the_posterior_type():
    """A GP method calibrates by default exactly where its posterior is a LeaveOneOut posterior; every
    posterior class is a Posterior."""
    for method in GP_METHODS.values():
        assert issubclass(method.posterior, Posterior)
        assert method.calibrates == issubclass(method.posterior, LeaveOneOut)
    assert GP_METHODS.names(lambda m: m.calibrates) == ("ecm", "fitc", "vi", "svi")


@pytest.mark.parametrize("inference", ["ecm", "fitc", "vi", "svi", "gibbs"])
def test_a_fit_keeps_the_posterior_its_method_names(inference):
    """The fitted ``_posterior`` is an instance of the method's posterior class, and a Gaussian one
    gives finite leave-one-out moments at every training row."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=40) > 0, 1, -1)
    small = {"ecm": dict(max_iter=20), "fitc": dict(max_iter=20, num_inducing=8), "vi": dict(max_iter=20),
             "svi": dict(max_iter=100, batch_size=20), "gibbs": dict(num_samples=20, num_warmup=20, num_chains=1)}
    clf = GPBSVM(inference=inference, learn_kernel=False, progress_bar=False, random_state=0, **small[inference])
    clf.fit(X, y)
    method = GP_METHODS[inference]
    assert isinstance(clf._posterior, method.posterior) and isinstance(clf._posterior, Posterior)
    if method.calibrates:
        mean, var = clf._posterior.loo_latent(X, y.astype(float), clf.gamma_, np.float64)
        assert mean.shape == var.shape == (40,) and np.all(np.isfinite(mean)) and np.all(var > 0)
    else:
        assert not isinstance(clf._posterior, LeaveOneOut)


def test_gp_settings_are_checked_once_into_a_frozen_record():
    """GPBSVM's parameters become one frozen GPSettings with its method's defaults filled in; the
    defaults that depend on the data stay None until the fit resolves them on its rows."""
    from bayes_maxmargin.core.kernels import ARD, Constant
    from bayes_maxmargin.estimators.gp import GPSettings

    settings = GPBSVM(inference="svi")._checked_params()
    assert isinstance(settings, GPSettings) and settings.method is GP_METHODS["svi"] and settings.inference == "svi"
    assert (settings.max_iter, settings.mlii_every, settings.precision, settings.gamma0) == (None, 5, "float32", 0.0)
    assert settings.kernel is None and settings.num_inducing is None and settings.batch_size is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.gamma = 2.0
    resolved = GPBSVM._resolved(settings, 1000)
    assert resolved.kernel == ARD() + Constant() and resolved.optimize_inducing is True
    assert (resolved.num_inducing, resolved.batch_size) == (64, 100) and settings.kernel is None
    ecm = GPBSVM(inference="ecm", num_inducing=500)._checked_params()
    assert (ecm.max_iter, ecm.mlii_every, ecm.mlii_tol, ecm.mlii_criterion) == (200, 20, 1e-4, "loo")
    assert GPBSVM._resolved(ecm, 100).num_inducing == 500  # not a setting of ECM: left as given
    with pytest.raises(InvalidParameterError, match="num_inducing: 500 .* N = 100"):
        GPBSVM._resolved(GPBSVM(inference="fitc", num_inducing=500)._checked_params(), 100)


def test_linear_settings_and_fit_results_are_typed():
    """LinearBSVM's parameters become one frozen LinearSettings; each fit step returns a LinearFit whose
    Gaussian (EM, SVI) is the posterior the fit keeps, and whose draws are it otherwise."""
    from bayes_maxmargin.estimators.linear import LinearSettings
    from bayes_maxmargin.models.linear.posterior import DrawsPosterior, PrecisionPosterior

    settings = LinearBSVM(inference="em")._checked_params()
    assert isinstance(settings, LinearSettings) and settings.inference == "em" and settings.wide is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.sigma = 2.0
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=60) > 0, 1, -1)
    em = LinearBSVM(inference="em", progress_bar=False).fit(X, y)
    gibbs = LinearBSVM(num_samples=50, num_warmup=50, num_chains=1, progress_bar=False, random_state=0).fit(X, y)
    assert isinstance(em._posterior, PrecisionPosterior) and isinstance(gibbs._posterior, DrawsPosterior)
    np.testing.assert_array_equal(em._posterior.mean, np.r_[em.coef_[0], em.intercept_])
