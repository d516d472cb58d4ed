"""Composed kernels (``RBF() + Linear()``, products, weights) and the one parameter mechanism of
:mod:`bayes_maxmargin.core.parameters`: matrices, paths, bijections, ML-II gradients and fits with every
GP inference method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.stats import multivariate_normal

import bayes_maxmargin as bmm
from bayes_maxmargin.core import parameters as P
from bayes_maxmargin.core.kernels import (
    ARD,
    RBF,
    Constant,
    Kernel,
    Linear,
    Polynomial,
    Product,
    ProductParams,
    Scaled,
    Sum,
    SumParams,
    as_kernel,
    get_kernel,
    kernel_diag,
    squared_distance,
)
from bayes_maxmargin.core.checks import InvalidParameterError
from bayes_maxmargin.models.gp.ecm import gp_log_marginal

RBF_LINEAR = RBF(lengthscale=1.5) + Linear(variance=0.3)
RBF_TIMES_POLY = RBF(lengthscale=2.0) * Polynomial(degree=2, offset=1.0)


def _data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.5 > 0, 1, 0)
    return X, y


# ------------------------------------------------------------------------------------------ algebra
@pytest.mark.parametrize("kernel", [RBF_LINEAR, RBF_TIMES_POLY, 0.5 * RBF() + 2.0 * Polynomial(degree=3),
                                    ARD(lengthscales=(1.0, 2.0)) * Linear(), ARD() + Constant(variance=2.0)])
def test_composed_matrix_and_diagonal_are_the_algebra_of_the_parts(kernel) -> None:
    X = np.random.default_rng(1).normal(size=(7, 2))
    Z = np.random.default_rng(2).normal(size=(4, 2))
    params = kernel.init_params(X)

    def direct(k, p):  # the algebra written out on the parts' own functions
        if isinstance(k, Sum):
            return direct(k.k1, p.k1) + direct(k.k2, p.k2)
        if isinstance(k, Product):
            return direct(k.k1, p.k1) * direct(k.k2, p.k2)
        if isinstance(k, Scaled):
            return p.variance * direct(k.k, p.k)
        return get_kernel(type(k).__name__.lower().replace("polynomial", "poly"))(p, X, Z)

    np.testing.assert_allclose(kernel(params, X, Z), direct(kernel, params), rtol=1e-12)
    np.testing.assert_allclose(kernel_diag(kernel, params, X), np.diag(kernel(params, X, X)), rtol=1e-12)


def test_kernel_objects_hash_by_value_and_structure_drops_the_values() -> None:
    assert RBF(2.0) + Linear() == RBF(2.0) + Linear()
    assert hash(RBF(2.0) + Linear()) == hash(RBF(2.0) + Linear())
    assert RBF(2.0) != RBF(3.0)
    assert get_kernel(RBF(2.0) + Linear(0.1)) == get_kernel(RBF(3.0) + Linear(5.0))
    assert get_kernel(Polynomial(degree=2)) != get_kernel(Polynomial(degree=3))  # the degree is compiled in
    assert as_kernel("rbf") == RBF() and as_kernel("poly") == Polynomial()
    assert repr(RBF(lengthscale=2.0) + 0.5 * Linear()) == "RBF(lengthscale=2.0) + 0.5 * (Linear())"
    with pytest.raises(TypeError):
        RBF() + 1.0  # noqa: B018


# ------------------------------------------------------------------------------------------ parameters
@jax.enable_x64(True)
def test_paths_bijections_and_flat_vector_of_a_composed_kernel() -> None:
    X = np.eye(3)
    params = (RBF(1.5) + 0.5 * Polynomial(degree=3, offset=2.0)).init_params(X)
    assert P.free_fields(params) == ("k1__lengthscale", "k1__amplitude", "k2__variance", "k2__k__offset")
    assert P.params_dict(params) == {"k1__lengthscale": 1.5, "k1__amplitude": 1.0, "k2__variance": 0.5,
                                     "k2__k__degree": 3, "k2__k__offset": 2.0}
    for bijection in (P.SOFTPLUS, P.LOG):
        back = P.from_unconstrained(P.to_unconstrained(params, bijection), params, bijection)
        np.testing.assert_allclose(jax.tree.leaves(back), jax.tree.leaves(params), rtol=1e-12)
    vec, unflatten = P.flatten(params)
    np.testing.assert_allclose(vec, np.log([1.5, 1.0, 0.5, 2.0]), rtol=1e-12)
    moved = unflatten(vec + 1.0)  # the degree is pytree metadata (STATIC), not a leaf
    np.testing.assert_allclose(jax.tree.leaves(moved), [1.5 * np.e, np.e, 0.5 * np.e, 2.0 * np.e], rtol=1e-12)
    assert moved.k2.k.degree == 3
    like = unflatten.like  # the structure alone: hashes as the values' Unflatten, keeps the fixed degree
    assert P.Unflatten.of(like) == unflatten and hash(P.Unflatten.of(like)) == hash(unflatten)
    assert like.k2.k.degree == 3 and unflatten != P.flatten(params._replace(k2=params.k2._replace(
        k=params.k2.k._replace(degree=2))))[1]
    np.testing.assert_array_equal(unflatten.coordinates(("k1__amplitude", "k2__k__offset")), [1, 3])
    with pytest.raises(KeyError, match="k3__variance"):
        P.replace_fields(params, {"k3__variance": 1.0})


def test_the_trainable_mask_names_paths_and_holds_the_rest() -> None:
    params = RBF_LINEAR.init_params(np.eye(2))
    assert P.trainable_fields(params, True) == P.free_fields(params)
    assert P.trainable_fields(params, ["k2__variance", "k1__lengthscale"]) == ("k1__lengthscale", "k2__variance")
    with pytest.raises(ValueError, match="'lengthscale' is not a learnable field.*k1__lengthscale"):
        P.trainable_fields(params, ["lengthscale"])
    raw = P.to_unconstrained(params)
    grad = jax.grad(lambda r: sum(jnp.sum(v**2) for v in P.hold_fixed(r, ("k2__variance",)).values()))(raw)
    assert [k for k, v in grad.items() if float(v) != 0.0] == ["k2__variance"]


# ------------------------------------------------------------------------------------------ ML-II
def _hand_written_log_z(raw: dict, X, y, inv_lam, gamma, jitter):
    """log N(Y (1 + lambda) | 0, K + Lambda / gamma) of Henao et al. (2014), eq. (9), for
    K = a exp(-||x - x'||^2 / l^2) + v x'x' + jitter I, every parameter softplus of its raw value."""
    ell, amp, var = (jax.nn.softplus(raw[k]) for k in ("k1__lengthscale", "k1__amplitude", "k2__variance"))
    d2 = jnp.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = amp * jnp.exp(-d2 / ell**2) + var * X @ X.T + jitter * jnp.eye(X.shape[0])
    t = y * (1.0 + 1.0 / inv_lam)
    return multivariate_normal.logpdf(t, jnp.zeros_like(t), K + jnp.diag(1.0 / (gamma * inv_lam)))


def test_mlii_gradient_of_a_sum_matches_the_hand_written_marginal_likelihood() -> None:
    X, y01 = _data(25)
    y = 2.0 * y01 - 1.0
    inv_lam = np.random.default_rng(3).uniform(0.2, 3.0, size=y.shape)
    params = RBF_LINEAR.init_params(X)
    raw = P.to_unconstrained(params)
    with jax.enable_x64(True):  # each compiled as one program (run op by op, every operation compiles alone)
        ours = jax.jit(jax.value_and_grad(lambda r: gp_log_marginal(P.from_unconstrained(r, params), X, y, inv_lam,
                                                                    0.7, kernel=RBF_LINEAR, jitter=1e-6)))(raw)
        ref = jax.jit(jax.value_and_grad(_hand_written_log_z))(raw, jnp.asarray(X), jnp.asarray(y), inv_lam, 0.7, 1e-6)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-9)
    for name in raw:
        np.testing.assert_allclose(ours[1][name], ref[1][name], rtol=1e-7, err_msg=name)


# ------------------------------------------------------------------------------------------ fits
# The product in every fit: extended. In the default run the sum's fits cover fitting a composed kernel
# (one code path for every composition), test_composed_matrix_and_diagonal_are_the_algebra_of_the_parts
# the product's matrix and test_sum_params_is_a_saved_type that a product fit's parameters are saved.
# The sum under svi: extended; test_gp_estimator.py::test_default_kernel_is_ard_plus_constant_for_svi_from_ard_min_rows
# fits the sum ARD() + Constant() with svi by default (ML-II moves both parts; saved and loaded).
# The sum under ecm: extended; test_learn_kernel_names_paths_of_a_composed_kernel fits the sum with ECM,
# learning a path of each part, and checks the same (ML-II moves both parts and never lowers log Z; the
# fit scored, saved and loaded).
# The sum under fitc: extended; FITC reads a kernel only through its matrix and diagonal
# (models.gp.covariance.fitc_factors: kernel(params, X, Z) and kernel_diag, checked for composed kernels
# by test_composed_matrix_and_diagonal_are_the_algebra_of_the_parts) and learns it by the ML-II of ECM's
# parameter mechanism (the ecm fit); tests/test_fitc.py fits FITC itself.
_FITS = [pytest.param(kernel, inference, id=f"{name}-{inference}",
                      marks=[pytest.mark.extended] if name == "rbf*poly" or inference in ("ecm", "fitc", "svi")
                      else [])
         for name, kernel in (("rbf+linear", RBF_LINEAR), ("rbf*poly", RBF_TIMES_POLY))
         for inference in ("ecm", "fitc", "gibbs", "svi")]


@pytest.mark.parametrize(("kernel", "inference"), _FITS)
def test_composed_kernel_fits_with_every_inference(kernel, inference, tmp_path) -> None:
    X, y = _data()
    kw = {"ecm": {}, "fitc": {"num_inducing": 15},
          "gibbs": {"num_samples": 30, "num_warmup": 20, "num_chains": 1},
          "svi": {"num_inducing": 15, "batch_size": 30, "max_iter": 300}}[inference]
    clf = bmm.GPBSVM(kernel=kernel, inference=inference, random_state=0, precision="float64", **kw).fit(X, y)
    theta0 = P.params_dict(kernel.init_params(X))
    assert set(clf.kernel_params_) == set(theta0)
    assert clf.score(X, y) >= 0.85
    if inference in ("ecm", "fitc"):  # ML-II moved the parameters of both parts and never lowered log Z
        assert np.all(clf.log_z_[:, 1] >= clf.log_z_[:, 0] - 1e-9)
        moved = {k for k in P.free_fields(kernel.init_params(X)) if clf.kernel_params_[k] != theta0[k]}
        assert {k.split("__")[0] for k in moved} == {"k1", "k2"}
    if inference == "gibbs":  # theta sampled: every composed field in the posterior and its slice statistics
        for name in P.free_fields(kernel.init_params(X)):
            assert clf.idata_.posterior[name].shape == (1, 30)
        assert float(clf.idata_.sample_stats["slice_evaluations"].min()) > 0
    path = bmm.save(clf, tmp_path / "fit.bmm")
    np.testing.assert_array_equal(bmm.load(path).predict_proba(X), clf.predict_proba(X))


class _LaplaceParams(NamedTuple):
    lengthscale: float = 1.0
    amplitude: float = 1.0

    properties = {"lengthscale": P.POSITIVE, "amplitude": P.POSITIVE}


@dataclass(frozen=True)
class _Laplace(Kernel):
    """a exp(-||x - x'|| / theta): a kernel the package does not know (the GP user guide's example)."""

    lengthscale: float = 1.0
    amplitude: float = 1.0

    def __call__(self, params, X1, X2):
        r = jnp.sqrt(squared_distance(X1, X2) + 1e-12)
        return params.amplitude * jnp.exp(-r / params.lengthscale)

    def diag(self, params, X):
        return jnp.full(jnp.shape(X)[0], params.amplitude)

    def init_params(self, X, lengthscale=None):
        return _LaplaceParams(self.lengthscale, self.amplitude)

    def structure(self):
        return _Laplace()


def test_a_kernel_of_ones_own_needs_only_its_declared_properties() -> None:
    """A kernel defined outside the package, whose container declares its fields and nothing more, is
    learnt by ML-II (log Z never lowered, both fields moved), sampled by Gibbs (its fields in the
    posterior) and takes kernel_params / learn_kernel by field name."""
    X, y = _data()
    ecm = bmm.GPBSVM(kernel=_Laplace(), inference="ecm", precision="float64", calibrate=False).fit(X, y)
    assert np.all(ecm.log_z_[:, 1] >= ecm.log_z_[:, 0] - 1e-9)
    assert ecm.kernel_params_["lengthscale"] != 1.0 and ecm.kernel_params_["amplitude"] != 1.0
    assert ecm.score(X, y) >= 0.85
    held = bmm.GPBSVM(kernel=_Laplace(), inference="ecm", kernel_params={"lengthscale": 2.0}, learn_kernel=["amplitude"],
                      precision="float64", calibrate=False).fit(X, y)
    assert held.kernel_params_["lengthscale"] == 2.0 and held.kernel_params_["amplitude"] != 1.0
    gibbs = bmm.GPBSVM(kernel=_Laplace(), inference="gibbs", num_samples=20, num_warmup=10, num_chains=1,
                       precision="float64", calibrate=False, random_state=0)
    with pytest.warns(bmm.MixingWarning):  # 20 draws: too few to judge, which the warning says
        gibbs.fit(X, y)
    assert gibbs.idata_.posterior["lengthscale"].shape == (1, 20)
    assert np.unique(gibbs.idata_.posterior["lengthscale"].values).size > 1


def test_rbf_object_is_the_rbf_name_and_a_scaled_kernel_its_amplitude() -> None:
    X, y = _data()  # theta held: ML-II of an RBF object's fields is that of the sum's first part (test above)
    # solver="fixed_point": the kernels are compared, and its programs compile in about 3/4 of the time;
    # calibrate=False: the link's leave-one-out pass (test_calibration.py) would compile for these fits alone
    fixed = dict(inference="ecm", learn_kernel=False, precision="float64", solver="fixed_point", calibrate=False)
    by_name = bmm.GPBSVM(kernel="rbf", kernel_params={"lengthscale": 1.3, "amplitude": 2.0}, **fixed).fit(X, y)
    by_object = bmm.GPBSVM(kernel=RBF(lengthscale=1.3, amplitude=2.0), **fixed).fit(X, y)
    np.testing.assert_array_equal(by_object.predict_proba(X), by_name.predict_proba(X))
    assert by_object.kernel_params_ == by_name.kernel_params_ == {"lengthscale": 1.3, "amplitude": 2.0}
    # a scaled kernel is its amplitude: the same matrix and diagonal, through which a fit reads its kernel
    # (the fits compared: test_a_scaled_kernel_fits_as_its_amplitude, -m extended)
    scaled, amplitude = 2.0 * RBF(lengthscale=1.3), RBF(lengthscale=1.3, amplitude=2.0)
    ps, pa = scaled.init_params(X), amplitude.init_params(X)
    np.testing.assert_allclose(scaled(ps, X, X), amplitude(pa, X, X), rtol=1e-12)
    np.testing.assert_allclose(kernel_diag(scaled, ps, X), kernel_diag(amplitude, pa, X), rtol=1e-12)


@pytest.mark.extended
def test_a_scaled_kernel_fits_as_its_amplitude() -> None:
    X, y = _data()
    fixed = dict(inference="ecm", learn_kernel=False, precision="float64", solver="fixed_point")
    by_object = bmm.GPBSVM(kernel=RBF(lengthscale=1.3, amplitude=2.0), **fixed).fit(X, y)
    scaled = bmm.GPBSVM(kernel=2.0 * RBF(lengthscale=1.3), **fixed).fit(X, y)
    np.testing.assert_allclose(scaled.predict_proba(X), by_object.predict_proba(X), rtol=1e-10)


def test_learn_kernel_names_paths_of_a_composed_kernel(tmp_path) -> None:
    X, y = _data()
    # one ECM fit, also the default run's ECM fit of a composed kernel (test_composed_kernel_fits_with_every_inference
    # runs it under -m extended): a path of each part learnt, a path set by kernel_params and held (paths held
    # at the kernel's own values: the fits of test_rbf_object_is_the_rbf_name_and_a_scaled_kernel_its_amplitude);
    # solver="fixed_point" as there (ECM's iterations to the end; the interior-point f-step: tests/test_gp_ecm.py)
    # calibrate=False: the kernel's paths are under test, not the learnt link (test_calibration.py)
    clf = bmm.GPBSVM(inference="ecm", kernel=RBF_LINEAR, learn_kernel=["k1__lengthscale", "k2__variance"],
                     kernel_params={"k1__amplitude": 0.5}, random_state=0, precision="float64",
                     solver="fixed_point", calibrate=False).fit(X, y)
    theta0 = {**P.params_dict(RBF_LINEAR.init_params(X)), "k1__amplitude": 0.5}
    assert set(clf.kernel_params_) == set(theta0)
    assert clf.score(X, y) >= 0.85
    assert np.all(clf.log_z_[:, 1] >= clf.log_z_[:, 0] - 1e-9)  # ML-II never lowered log Z
    for k in ("k1__lengthscale", "k2__variance"):  # ML-II moved the learnt path of each part
        assert clf.kernel_params_[k] != theta0[k], k
    # held (up to the rounding of softplus and its inverse)
    np.testing.assert_allclose(clf.kernel_params_["k1__amplitude"], theta0["k1__amplitude"], rtol=1e-14)
    path = bmm.save(clf, tmp_path / "fit.bmm")
    np.testing.assert_array_equal(bmm.load(path).predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize(("kernel", "kernel_params", "match"), [
    (RBF() + Linear(variance=-1.0), None, r"k2__variance \(Linear\) of kernel RBF\(\) \+ Linear\(variance=-1.0\)"),
    (RBF() * Polynomial(offset=-0.5), None, r"k2__offset \(Polynomial\).*must be a real number >= 0"),
    (RBF_LINEAR, {"k1__lengthscale": 0.0}, r"kernel_params\['k1__lengthscale'\]"),
    (RBF_LINEAR, {"lengthscale": 1.0}, r"Invalid key 'lengthscale'.*valid keys are k1__lengthscale"),
    (RBF() + 1.5 * RBF(), ["k2__lengthscale"], r"learn_kernel: 'k2__lengthscale' is not a learnable field"),
])
def test_bad_composed_kernels_name_the_component_and_the_parameter(kernel, kernel_params, match) -> None:
    X, y = _data(20)
    kw = {"learn_kernel": kernel_params} if isinstance(kernel_params, list) else {"kernel_params": kernel_params}
    with pytest.raises(InvalidParameterError, match=match):
        bmm.GPBSVM(inference="ecm", kernel=kernel, **kw).fit(X, y)


@pytest.mark.parametrize("estimator", ["gp", "factor"])
@pytest.mark.parametrize("kernel", [ARD(lengthscales=(1.0, 2.0)), ARD(lengthscales=(1.0, 2.0)) + Constant()])
def test_ard_length_scales_of_the_wrong_count_are_named_at_fit(estimator, kernel) -> None:
    """An ARD kernel object with 2 length-scales for 3 inputs (GPBSVM: the 3 features; FactorBSVM: its
    n_factors=3 factor scores): a ValueError naming the parameter, the count given and the count needed,
    before anything is compiled (not NumPy's broadcasting error)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4 if estimator == "factor" else 3))
    y = (X[:, 0] > 0).astype(int)
    est = (bmm.GPBSVM(inference="ecm", kernel=kernel) if estimator == "gp"
           else bmm.FactorBSVM(n_factors=3, kernel=kernel, classifier="gp"))
    context = "" if estimator == "gp" else r".*the kernel acts on the n_factors=3 factor scores"
    with pytest.raises(ValueError, match=r"lengthscales of ARD\(lengthscales=\(1\.0, 2\.0\)\): 2 length-scales for "
                                         rf"3 input dimensions{context}"):
        est.fit(X, y)


def test_sum_params_is_a_saved_type() -> None:
    from bayes_maxmargin.persistence import _registry

    assert SumParams in _registry().values() and Sum in _registry().values()
    assert ProductParams in _registry().values() and Product in _registry().values()


@pytest.mark.parametrize("inference", [pytest.param("gibbs", marks=pytest.mark.extended), "vbem"])
def test_factor_model_takes_a_composed_kernel(inference, tmp_path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 6))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    kw = dict(num_samples=30, num_warmup=20, num_chains=1) if inference == "gibbs" else dict(max_iter=4)
    common = dict(n_factors=2, classifier="gp", inference=inference, random_state=0, **kw)
    clf = bmm.FactorBSVM(kernel=RBF() + Linear(variance=0.5), **common).fit(X, y)
    assert set(clf.kernel_params_) == {"k1__lengthscale", "k1__amplitude", "k2__variance"}
    # Gibbs keeps the length-scale at sqrt(2 K), VB-EM's M-step moves it
    assert (clf.kernel_params_["k1__lengthscale"] == 2.0) == (inference == "gibbs")
    assert clf.kernel_params_["k2__variance"] == 0.5  # VB-EM learns length-scales only
    path = bmm.save(clf, tmp_path / "factor.bmm")
    np.testing.assert_array_equal(bmm.load(path).predict_proba(X), clf.predict_proba(X))


# FactorBSVM's defaults of a kernel name and object come from one line (as_kernel(kernel).init_params):
# test_kernel_objects_hash_by_value_and_structure_drops_the_values checks as_kernel("rbf") == RBF() and
# test_rbf_object_is_the_rbf_name_and_a_scaled_kernel_its_amplitude the fits of GPBSVM by name and object
@pytest.mark.extended
def test_factor_model_takes_the_rbf_object_as_the_rbf_name() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 6))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    common = dict(n_factors=2, classifier="gp", inference="vbem", random_state=0, max_iter=8)
    by_name = bmm.FactorBSVM(kernel="rbf", **common).fit(X, y)
    by_object = bmm.FactorBSVM(kernel=RBF(), **common).fit(X, y)
    np.testing.assert_array_equal(by_object.predict_proba(X), by_name.predict_proba(X))


def test_parameter_functions_moved_from_kernels_still_import_with_a_warning() -> None:
    from bayes_maxmargin.core import kernels

    with pytest.warns(DeprecationWarning, match="moved to bayes_maxmargin.core.parameters.to_unconstrained"):
        assert kernels.to_unconstrained is P.to_unconstrained
    for name in kernels._MOVED_TO_PARAMETERS:  # each of them, also those the module itself uses
        with pytest.warns(DeprecationWarning, match=f"moved to bayes_maxmargin.core.parameters.{name}"):
            assert getattr(kernels, name) is getattr(P, name)
    with pytest.raises(AttributeError, match="no attribute 'pack_everything'"):
        kernels.pack_everything  # noqa: B018


def test_kernel_params_may_be_the_kernels_own_container() -> None:
    """kernel_params given as a (composed) kernel's parameter container is read by path, as its dict; a
    plain NamedTuple by its field names."""
    from bayes_maxmargin.core.kernels import LinearParams, SEParams
    from bayes_maxmargin.core.kernels import check_kernel_params

    X = np.eye(3)
    defaults = RBF_LINEAR.init_params(X)
    given = SumParams(SEParams(2.0, 1.5), LinearParams(0.3))
    assert P.params_dict(check_kernel_params(RBF_LINEAR, given, defaults)) == P.params_dict(given)
    assert P.params_dict(check_kernel_params(RBF(), SEParams(2.0, 1.5), RBF().init_params(X))) == {
        "lengthscale": 2.0, "amplitude": 1.5}


def test_polynomial_kernel_fits_at_the_default_inference() -> None:
    """``GPBSVM(kernel="poly")`` with ML-II (ECM, the default on small data): the degree stays fixed
    through the compiled rounds (it crashed as a traced array there; ``rbf*poly`` with ECM, FITC and
    Gibbs is covered by the extended fits above)."""
    X, y = _data()
    clf = bmm.GPBSVM(kernel="poly", random_state=0).fit(X, y)
    assert clf.kernel_params_["degree"] == 2 and clf.kernel_params_["offset"] != 1.0
    assert clf.score(X, y) >= 0.85
