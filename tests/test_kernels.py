"""Tests for bayes_maxmargin.core.kernels.

XLA compilation dominates the run time of these tests, so kernels are evaluated
through a cache of jitted functions on one fixed set of input shapes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core import kernels as K
from bayes_maxmargin.core import parameters as P

DTYPES = ["float32", "float64"]
N1, N2, D = 7, 5, 3


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
@contextlib.contextmanager
def precision(dtype: str) -> Iterator[np.dtype]:
    """Run the body in float32 (default) or float64 (``jax.enable_x64``) mode."""
    if dtype == "float64":
        with jax.enable_x64(True):
            yield np.dtype(np.float64)
    else:
        yield np.dtype(np.float32)


def tol(dtype: np.dtype) -> dict[str, float]:
    return {"rtol": 1e-10, "atol": 1e-12} if dtype == np.float64 else {"rtol": 2e-5, "atol": 2e-5}


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N1, D)), rng.normal(size=(N2, D))


def stacked() -> np.ndarray:
    """All test inputs in one (N1 + N2, D) array; K(Z, Z)[:N1, N1:] is K(X1, X2)."""
    return np.vstack(data())


_JITTED: dict[Callable[..., Any], Callable[..., Any]] = {}


def evaluate(name: str, params: Any, X1: Any, X2: Any) -> np.ndarray:
    """The kernel matrix through a cached jitted kernel."""
    fn = K.get_kernel(name)
    if fn not in _JITTED:
        _JITTED[fn] = jax.jit(fn)
    return np.asarray(_JITTED[fn](params, X1, X2))


def loop_kernel(f: Callable[[np.ndarray, np.ndarray], float], X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
    out = np.empty((X1.shape[0], X2.shape[0]))
    for i, x in enumerate(X1):
        for j, z in enumerate(X2):
            out[i, j] = f(x, z)
    return out


THETA, AMP = 1.3, 0.7
LS = np.array([0.5, 1.0, 2.0])
CASES: list[tuple[str, Callable[[], Any], Callable[[np.ndarray, np.ndarray], float]]] = [
    # (kernel name, params factory (called inside the precision context), reference k(x, z))
    ("se", lambda: K.SEParams(THETA, AMP), lambda x, z: AMP * np.exp(-np.sum((x - z) ** 2) / THETA**2)),
    (
        "ard",
        lambda: K.ARDParams(jnp.asarray(LS), AMP),
        lambda x, z: AMP * np.exp(-np.sum((x - z) ** 2 / LS**2)),
    ),
    ("poly", lambda: K.PolyParams(3, 0.5), lambda x, z: (x @ z + 0.5) ** 3),
    ("linear", lambda: K.LinearParams(1.7), lambda x, z: 1.7 * (x @ z)),
    ("constant", lambda: K.ConstantParams(0.6), lambda x, z: 0.6),
]
IDS = [c[0] for c in CASES]


# --------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "make_params", "ref"), CASES, ids=IDS)
def test_matches_numpy_loop(name: str, make_params: Callable[[], Any], ref: Callable, dtype: str) -> None:
    Z = stacked()
    with precision(dtype) as dt:
        Zj = jnp.asarray(Z, dt)
        G = evaluate(name, make_params(), Zj, Zj)
    assert G.shape == (N1 + N2, N1 + N2) and G.dtype == dt
    np.testing.assert_allclose(G, loop_kernel(ref, Z, Z), **tol(dt))
    # cross-covariance block with different numbers of rows
    np.testing.assert_allclose(G[:N1, N1:], loop_kernel(ref, *data()), **tol(dt))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "make_params", "ref"), CASES, ids=IDS)
def test_symmetric_psd(name: str, make_params: Callable[[], Any], ref: Callable, dtype: str) -> None:
    with precision(dtype) as dt:
        Zj = jnp.asarray(stacked(), dt)
        G = evaluate(name, make_params(), Zj, Zj).astype(float)
    np.testing.assert_allclose(G, G.T, **tol(dt))
    eig = np.linalg.eigvalsh(0.5 * (G + G.T))
    assert eig.min() >= -(1e-10 if dt == np.float64 else 1e-5) * np.abs(eig).max()


@pytest.mark.parametrize("dtype", DTYPES)
def test_se_is_exactly_henao_form(dtype: str) -> None:
    # Points at distance r from the origin: k = a exp(-r^2 / theta^2) (no factor 1/2, squared distance)
    theta, a = 0.8, 2.0
    r = np.array([0.0, 0.4, theta, 1.5, 3.0])
    Z = np.zeros((N1 + N2, D))
    Z[1 : 1 + r.size, 0] = r
    with precision(dtype) as dt:
        Zj = jnp.asarray(Z, dt)
        G = evaluate("se", K.SEParams(theta, a), Zj, Zj)
    np.testing.assert_allclose(G[0, 1 : 1 + r.size], a * np.exp(-(r**2) / theta**2), **tol(dt))
    np.testing.assert_allclose(G[0, 1 + 2], a / np.e, **tol(dt))  # at r = theta: a / e


@pytest.mark.parametrize("dtype", DTYPES)
def test_ard_with_equal_lengthscales_equals_se(dtype: str) -> None:
    with precision(dtype) as dt:
        Zj = jnp.asarray(stacked(), dt)
        a = evaluate("ard", K.ARDParams(jnp.full((D,), 0.9, dt), 1.4), Zj, Zj)
        b = evaluate("se", K.SEParams(0.9, 1.4), Zj, Zj)
    np.testing.assert_allclose(a, b, **tol(dt))


def test_polynomial_default_offset_and_degree_forms() -> None:
    X1, X2 = data()
    out = K.polynomial(K.PolyParams(2), X1, X2)
    np.testing.assert_allclose(np.asarray(out), (X1 @ X2.T + 1.0) ** 2, rtol=1e-5)
    # an (integer-valued) array degree gives the same, including negative bases
    traced = jax.jit(K.polynomial)(K.PolyParams(jnp.asarray(3.0), 0.0), X1, X2)
    np.testing.assert_allclose(np.asarray(traced), (X1 @ X2.T) ** 3, rtol=1e-5, atol=1e-5)
    # degree 0 is the constant kernel
    np.testing.assert_allclose(np.asarray(K.polynomial(K.PolyParams(0), X1, X2)), np.ones((N1, N2)))


def test_squared_distance_nonnegative_and_zero_diagonal() -> None:
    rng = np.random.default_rng(1)
    X = 1e3 + rng.normal(size=(20, 4))  # large offset: cancellation-prone
    X = np.vstack([X, X[:3]])  # duplicated rows
    Dm = np.asarray(K.squared_distance(X, X))
    assert Dm.min() >= 0.0
    ref = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(Dm, ref, atol=1e-2)
    assert np.all(Dm[np.arange(20, 23), np.arange(3)] < 1e-2)


# --------------------------------------------------------------------------
# JAX transformations
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "make_params", "ref"), CASES, ids=IDS)
def test_jit_equals_eager(name: str, make_params: Callable[[], Any], ref: Callable, dtype: str) -> None:
    with precision(dtype) as dt:
        Zj = jnp.asarray(stacked(), dt)
        params = make_params()
        eager = np.asarray(K.get_kernel(name)(params, Zj, Zj))
        jitted = evaluate(name, params, Zj, Zj)
    assert eager.dtype == jitted.dtype == dt
    np.testing.assert_allclose(jitted, eager, **tol(dt))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "make_params", "ref"), CASES, ids=IDS)
def test_param_gradients_finite(name: str, make_params: Callable[[], Any], ref: Callable, dtype: str) -> None:
    Z = stacked()
    Z[-1] = Z[0]  # a duplicated point: zero distance must not give NaN gradients
    with precision(dtype) as dt:
        k = K.get_kernel(name)
        params = make_params()
        raw = P.to_unconstrained(params)
        Zj = jnp.asarray(Z, dt)

        def loss(r: dict[str, jax.Array]) -> jax.Array:
            return jnp.sum(k(P.from_unconstrained(r, like=params), Zj, Zj) ** 2)

        grads = jax.jit(jax.grad(loss))(raw)
    assert set(grads) == set(raw)
    for g in jax.tree_util.tree_leaves(grads):
        assert np.all(np.isfinite(np.asarray(g)))
        assert np.any(np.asarray(g) != 0.0)


def test_gradient_matches_finite_differences() -> None:
    eps = 1e-6
    with jax.enable_x64(True):
        Zj = jnp.asarray(stacked())

        @jax.jit
        def f(theta: jax.Array) -> jax.Array:
            return jnp.sum(K.ard_se(K.ARDParams(theta, 1.0), Zj, Zj))

        ls = jnp.asarray([0.5, 1.0, 2.0])
        g = jax.jit(jax.grad(f))(ls)
        for j in range(D):
            e = jnp.zeros(D).at[j].set(eps)
            fd = (f(ls + e) - f(ls - e)) / (2 * eps)
            np.testing.assert_allclose(float(g[j]), float(fd), rtol=1e-6)
        # the isotropic kernel: theta -> the same lengthscale in every dimension
        g_se = jax.jit(jax.grad(lambda t: jnp.sum(K.se(K.SEParams(t, 1.0), Zj, Zj))))(1.2)
        fd_se = (f(jnp.full(D, 1.2 + eps)) - f(jnp.full(D, 1.2 - eps))) / (2 * eps)
        np.testing.assert_allclose(float(g_se), float(fd_se), rtol=1e-6)


def test_vmap_over_lengthscales() -> None:
    Zj = jnp.asarray(stacked(), jnp.float32)
    thetas = jnp.asarray([0.5, 1.0, 2.0])
    batched = jax.jit(jax.vmap(lambda t: K.se(K.SEParams(t, 1.0), Zj, Zj)))(thetas)
    assert batched.shape == (3, N1 + N2, N1 + N2)
    for i, t in enumerate(thetas):
        expected = evaluate("se", K.SEParams(t, 1.0), Zj, Zj)
        np.testing.assert_allclose(np.asarray(batched[i]), expected, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------
# diagonal, registry, parametrisation
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "make_params", "ref"), CASES, ids=IDS)
def test_kernel_diag(name: str, make_params: Callable[[], Any], ref: Callable, dtype: str) -> None:
    with precision(dtype) as dt:
        params = make_params()
        Zj = jnp.asarray(stacked(), dt)
        full = np.diag(evaluate(name, params, Zj, Zj))
        diag = jax.jit(lambda p, X: K.kernel_diag(name, p, X))(params, Zj)
    assert diag.shape == (N1 + N2,) and diag.dtype == dt
    np.testing.assert_allclose(np.asarray(diag), full, **tol(dt))


def test_kernel_diag_by_function_and_custom_kernel() -> None:
    X, _ = data()
    np.testing.assert_allclose(
        np.asarray(K.kernel_diag(K.linear, K.LinearParams(2.0), X)), 2.0 * np.sum(X * X, 1), rtol=1e-5
    )

    def custom(p: K.LinearParams, A: jax.Array, B: jax.Array) -> jax.Array:
        return p.variance * (A @ B.T + 2.0)

    diag = K.kernel_diag(custom, K.LinearParams(3.0), X)
    np.testing.assert_allclose(np.asarray(diag), 3.0 * (np.sum(X * X, 1) + 2.0), rtol=1e-5)


def test_registry_and_get_kernel() -> None:
    assert set(K.KERNELS) == {"rbf", "se", "ard", "poly", "linear", "constant"}
    # one table: a name, the kernel's function and its object give the same kernel object
    assert K.get_kernel("rbf") == K.get_kernel("se") == K.get_kernel("RBF") == K.get_kernel(K.se) == K.RBF()
    assert K.get_kernel("ard") == K.ARD() and K.ARD.function is K.ard_se
    assert K.get_kernel("poly") == K.Polynomial() and K.Polynomial.function is K.polynomial
    assert K.get_kernel("linear") == K.get_kernel(K.linear) == K.Linear()
    assert K.get_kernel("constant") == K.as_kernel("constant") == K.Constant()
    assert K.get_kernel(K.RBF(lengthscale=2.0)) == K.RBF()  # its structure: the values are not compiled in
    for cls in set(K.KERNELS.values()):
        params = cls.Params(np.ones(2)) if cls is K.ARD else cls.Params()
        X = np.arange(6.0).reshape(3, 2)
        np.testing.assert_allclose(cls().diag(params, X), np.diag(cls.function(params, X, X)), rtol=1e-6)
    with pytest.raises(ValueError, match="unknown kernel 'matern'.*'ard'.*'linear'.*'poly'.*'rbf'.*'se'"):
        K.get_kernel("matern")
    with pytest.raises(ValueError, match="valid names"):
        K.kernel_diag("matern", K.SEParams(), np.zeros((2, 1)))


@pytest.mark.parametrize(
    "make_params",
    [
        lambda: K.SEParams(0.3, 2.5),
        lambda: K.ARDParams(jnp.asarray([0.1, 1.0, 30.0]), 0.5),
        lambda: K.PolyParams(4, 0.25),
        lambda: K.LinearParams(1e-3),
        lambda: K.ConstantParams(4.0),
    ],
    ids=["se", "ard", "poly", "linear", "constant"],
)
def test_unconstrained_round_trip(make_params: Callable[[], Any]) -> None:
    with jax.enable_x64(True):
        params = make_params()
        raw = P.to_unconstrained(params)
        back = P.from_unconstrained(raw, like=params)
        assert type(back) is type(params)
        for name in raw:
            np.testing.assert_allclose(
                np.asarray(getattr(back, name)), np.asarray(getattr(params, name)), rtol=1e-10
            )
        if isinstance(params, K.PolyParams):
            assert set(raw) == {"offset"} and back.degree == params.degree
        # any real raw value maps to a positive parameter
        shifted = jax.tree_util.tree_map(lambda r: r - 50.0, raw)
        for name, value in P.from_unconstrained(shifted, like=params)._asdict().items():
            if name in raw:
                assert np.all(np.asarray(value) > 0)


@pytest.mark.parametrize(
    "params",
    [K.SEParams(0.3, 2.5), K.ARDParams(np.asarray([0.1, 1.0]), 0.5), K.PolyParams(4, 0.25), K.LinearParams(1e-3),
     K.ConstantParams(4.0)],
    ids=["se", "ard", "poly", "linear", "constant"],
)
def test_free_fields_are_the_unconstrained_keys(params: Any) -> None:
    assert P.free_fields(params) == tuple(P.to_unconstrained(params))


def test_unknown_params_type_raises() -> None:
    with pytest.raises(TypeError, match="no parametrisation for tuple.*class attribute .properties"):
        P.to_unconstrained((1.0, 2.0))  # type: ignore[arg-type]


def test_static_field_is_compiled_in_not_traced() -> None:
    """The polynomial degree (STATIC) is pytree metadata: a container crossing ``jit`` keeps it a Python
    int, so :func:`~bayes_maxmargin.core.parameters.flatten` can read it inside compiled code (ECM's ML-II
    and the Gibbs theta sampler flatten the kernel parameters inside their loops)."""
    params = K.PolyParams(degree=np.int64(3), offset=1.5)
    assert jax.tree_util.tree_leaves(params) == [1.5]

    @jax.jit
    def inside(p):
        vector, unflatten = P.flatten(p)
        assert unflatten(vector).degree == 3 and isinstance(p.degree, int)
        return vector

    np.testing.assert_allclose(inside(params), [np.log(1.5)])
    nested = (K.RBF() * K.Polynomial(degree=2)).init_params(np.zeros((1, 2)))
    assert len(jax.tree_util.tree_leaves(nested)) == 3  # length-scale, amplitude, offset
    with pytest.raises(TypeError, match="STATIC"):
        jax.tree_util.tree_leaves(K.PolyParams(degree=np.array([2, 3])))
