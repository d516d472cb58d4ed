"""Covariance functions written as pure JAX functions of ``(params, X1, X2)``.

Every kernel in this module has the signature ``k(params, X1, X2) -> K`` where
``X1`` has shape ``(N, d)``, ``X2`` has shape ``(M, d)`` and ``K`` has shape
``(N, M)``. Parameters live in small :class:`~typing.NamedTuple` containers, so
they are JAX pytrees: a kernel can be jit-compiled, vmapped over a batch of
parameters and differentiated with respect to its (continuous) parameters.

The kernels are

=============  ==========================================================
name           formula
=============  ==========================================================
``"se"``       ``a * exp(-||x - x'||^2 / theta^2)``            (:func:`se`)
``"rbf"``      alias of ``"se"``
``"ard"``      ``a * exp(-sum_j (x_j - x'_j)^2 / theta_j^2)``  (:func:`ard_se`)
``"poly"``     ``(x^T x' + c)^p``                          (:func:`polynomial`)
``"linear"``   ``v * x^T x'``                                  (:func:`linear`)
=============  ==========================================================

The squared-exponential kernel follows Henao et al. (2014) exactly: there is
no factor ``1/2`` in the exponent, so ``theta`` here equals ``sqrt(2)`` times
the lengthscale of the ``exp(-r^2 / (2 l^2))`` convention.

:func:`to_unconstrained` and :func:`from_unconstrained` map the positive
parameters to and from the real line, so that gradient-based optimisers
(e.g. Optax) can work on unconstrained values.

References
----------
R. Henao, X. Yuan and L. Carin (2014). Bayesian nonlinear support vector
machines and discriminative factor modeling. NeurIPS 27.

F. Wenzel, T. Galy-Fajou, M. Deutsch and M. Kloft (2017). Bayesian nonlinear
support vector machines for big data. ECML-PKDD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

__all__ = ["ARDParams", "KERNELS", "KernelFn", "KernelParams", "LinearParams", "PolyParams", "SEParams",
           "ard_se", "free_fields", "from_unconstrained", "get_kernel", "kernel_diag", "linear",
           "params_dict", "polynomial", "se", "squared_distance", "to_unconstrained"]

Array: TypeAlias = jax.Array


class SEParams(NamedTuple):
    """Parameters of the squared-exponential kernel :func:`se`.

    Attributes
    ----------
    lengthscale : ArrayLike
        Positive scalar ``theta`` in ``exp(-||x - x'||^2 / theta^2)``.
    amplitude : ArrayLike
        Positive scalar variance ``a = k(x, x)``.
    """

    lengthscale: ArrayLike = 1.0
    amplitude: ArrayLike = 1.0


class ARDParams(NamedTuple):
    """Parameters of the automatic-relevance-determination kernel :func:`ard_se`.

    Attributes
    ----------
    lengthscales : ArrayLike
        Positive vector ``theta`` of shape ``(d,)``, one lengthscale per input
        dimension (a scalar broadcasts to all dimensions).
    amplitude : ArrayLike
        Positive scalar variance ``a = k(x, x)``.
    """

    lengthscales: ArrayLike
    amplitude: ArrayLike = 1.0


class PolyParams(NamedTuple):
    """Parameters of the polynomial kernel :func:`polynomial`.

    Attributes
    ----------
    degree : int or ArrayLike
        Integer degree ``p``. It is a fixed hyperparameter: no gradient flows
        to it and :func:`to_unconstrained` leaves it out. A Python ``int``
        gives an exact integer power; an array degree must hold an integer
        value (negative bases are then still handled correctly).
    offset : ArrayLike
        Non-negative scalar ``c`` in ``(x^T x' + c)^p``; ``c > 0`` makes the
        kernel inhomogeneous. Default ``1.0``.
    """

    degree: int | ArrayLike = 2
    offset: ArrayLike = 1.0


class LinearParams(NamedTuple):
    """Parameters of the linear kernel :func:`linear`.

    Attributes
    ----------
    variance : ArrayLike
        Positive scalar ``v`` in ``v * x^T x'``. Default ``1.0``.
    """

    variance: ArrayLike = 1.0


KernelParams: TypeAlias = SEParams | ARDParams | PolyParams | LinearParams
"""Any of the parameter containers of this module."""

KernelFn: TypeAlias = Callable[[Any, ArrayLike, ArrayLike], Array]
"""A kernel: ``k(params, X1, X2) -> (N, M)`` array."""


# --------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------
def _as_2d(X: ArrayLike) -> Array:
    """Return ``X`` as an ``(N, d)`` array (a vector is read as one row per entry)."""
    X = jnp.asarray(X)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"expected an (N, d) array of inputs, got shape {X.shape}")
    return X


def _dot(A: Array, B: Array) -> Array:
    """``A @ B.T`` at full float precision (no reduced-precision matmul on accelerators)."""
    return jnp.matmul(A, B.T, precision=lax.Precision.HIGHEST)


def squared_distance(X1: ArrayLike, X2: ArrayLike) -> Array:
    """Pairwise squared Euclidean distances ``||x_i - x'_j||^2``.

    Computed as ``|x|^2 + |x'|^2 - 2 x^T x'`` (one matrix product, ``O(N M)``
    memory instead of the ``O(N M d)`` of explicit differences). Before the
    expansion both sets are shifted by the mean of ``X1``; distances are
    translation invariant, and centring shrinks the norms and thus the
    cancellation error of the expansion. The result is clamped at ``0``
    because rounding can leave tiny negative values for (nearly) coincident
    points, which would make ``exp(-d^2 / theta^2)`` exceed the amplitude and
    break positive semi-definiteness.

    Parameters
    ----------
    X1 : ArrayLike
        Inputs of shape ``(N, d)`` (a vector of shape ``(N,)`` is read as
        ``(N, 1)``).
    X2 : ArrayLike
        Inputs of shape ``(M, d)``.

    Returns
    -------
    Array
        Non-negative array of shape ``(N, M)``.
    """
    X1 = _as_2d(X1)
    X2 = _as_2d(X2)
    centre = jnp.mean(X1, axis=0)
    A = X1 - centre
    B = X2 - centre
    sq1 = jnp.sum(A * A, axis=-1)
    sq2 = jnp.sum(B * B, axis=-1)
    d2 = sq1[:, None] + sq2[None, :] - 2.0 * _dot(A, B)
    return jnp.maximum(d2, 0.0)


# --------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------
def se(params: SEParams, X1: ArrayLike, X2: ArrayLike) -> Array:
    """Squared-exponential (RBF) kernel in the convention of Henao et al. (2014).

    ``k(x, x') = a * exp(-||x - x'||^2 / theta^2)``

    with ``theta = params.lengthscale`` and ``a = params.amplitude``. There is
    no factor ``1/2`` in the exponent. The footnote defining the kernel in
    Wenzel et al. (2017) writes the unsquared distance ``||x - x'||`` in the
    exponent; this library uses the squared distance, as Henao et al. do
    (the unsquared form would be the exponential / Ornstein-Uhlenbeck kernel).

    Parameters
    ----------
    params : SEParams
        ``lengthscale`` (``theta > 0``) and ``amplitude`` (``a > 0``).
    X1 : ArrayLike
        Inputs of shape ``(N, d)``.
    X2 : ArrayLike
        Inputs of shape ``(M, d)``.

    Returns
    -------
    Array
        Kernel matrix of shape ``(N, M)``.
    """
    theta = jnp.asarray(params.lengthscale)
    return params.amplitude * jnp.exp(-squared_distance(X1, X2) / (theta * theta))


def ard_se(params: ARDParams, X1: ArrayLike, X2: ArrayLike) -> Array:
    """Squared-exponential kernel with one lengthscale per input dimension (ARD).

    ``k(x, x') = a * exp(-sum_j (x_j - x'_j)^2 / theta_j^2)``

    With all ``theta_j`` equal to ``theta`` it coincides with :func:`se`.

    Parameters
    ----------
    params : ARDParams
        ``lengthscales`` (shape ``(d,)``, positive) and ``amplitude``.
    X1 : ArrayLike
        Inputs of shape ``(N, d)``.
    X2 : ArrayLike
        Inputs of shape ``(M, d)``.

    Returns
    -------
    Array
        Kernel matrix of shape ``(N, M)``.
    """
    theta = jnp.asarray(params.lengthscales)
    X1 = _as_2d(X1) / theta
    X2 = _as_2d(X2) / theta
    return params.amplitude * jnp.exp(-squared_distance(X1, X2))


def _int_degree(degree: Any) -> int | None:
    """The degree as a Python ``int`` when it is a concrete integer, else ``None``."""
    if isinstance(degree, (bool, np.bool_)):
        return None
    if isinstance(degree, (int, np.integer)):
        return int(degree)
    return None


def _power(base: Array, degree: Any) -> Array:
    """``base ** degree`` for a fixed integer degree (no gradient to the degree)."""
    p = _int_degree(degree)
    if p is not None:
        if p < 0:
            raise ValueError(f"the polynomial degree must be non-negative, got {p}")
        return lax.integer_pow(base, p) if p > 0 else jnp.ones_like(base)
    # traced or float degree: lax.pow handles negative bases with an
    # integer-valued exponent; the degree is a fixed hyperparameter.
    return jnp.power(base, lax.stop_gradient(jnp.asarray(degree)))


def polynomial(params: PolyParams, X1: ArrayLike, X2: ArrayLike) -> Array:
    """Polynomial kernel ``k(x, x') = (x^T x' + c)^p``.

    With the default offset ``c = 1`` this is ``(x^T x' + 1)^p``.

    Parameters
    ----------
    params : PolyParams
        ``degree`` (fixed integer ``p >= 0``) and ``offset`` (``c >= 0``).
    X1 : ArrayLike
        Inputs of shape ``(N, d)``.
    X2 : ArrayLike
        Inputs of shape ``(M, d)``.

    Returns
    -------
    Array
        Kernel matrix of shape ``(N, M)``.
    """
    base = _dot(_as_2d(X1), _as_2d(X2)) + params.offset
    return _power(base, params.degree)


def linear(params: LinearParams, X1: ArrayLike, X2: ArrayLike) -> Array:
    """Linear kernel ``k(x, x') = v * x^T x'``.

    Parameters
    ----------
    params : LinearParams
        ``variance`` (``v > 0``).
    X1 : ArrayLike
        Inputs of shape ``(N, d)``.
    X2 : ArrayLike
        Inputs of shape ``(M, d)``.

    Returns
    -------
    Array
        Kernel matrix of shape ``(N, M)``.
    """
    return params.variance * _dot(_as_2d(X1), _as_2d(X2))


# --------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------
KERNELS: dict[str, KernelFn] = {
    "rbf": se,
    "se": se,
    "ard": ard_se,
    "poly": polynomial,
    "linear": linear,
}
"""Kernels by name; ``"rbf"`` and ``"se"`` are the same function."""


def get_kernel(name: str | KernelFn) -> KernelFn:
    """Look a kernel up by name in :data:`KERNELS`.

    Parameters
    ----------
    name : str or callable
        One of the keys of :data:`KERNELS` (case-insensitive). A callable is
        returned unchanged, so that code can accept either form.

    Returns
    -------
    callable
        The kernel function ``k(params, X1, X2)``.

    Raises
    ------
    ValueError
        If ``name`` is not a known kernel name; the message lists the valid
        names.
    """
    if callable(name):
        return name
    key = name.lower() if isinstance(name, str) else name
    try:
        return KERNELS[key]
    except (KeyError, TypeError):
        valid = ", ".join(repr(k) for k in sorted(KERNELS))
        raise ValueError(f"unknown kernel {name!r}; valid names are {valid}") from None


def _ones(X: Array, scale: ArrayLike) -> Array:
    return jnp.asarray(scale) * jnp.ones(X.shape[0], dtype=X.dtype)


def _se_diag(params: SEParams, X: Array) -> Array:
    return _ones(X, params.amplitude)


def _ard_diag(params: ARDParams, X: Array) -> Array:
    return _ones(X, params.amplitude)


def _poly_diag(params: PolyParams, X: Array) -> Array:
    return _power(jnp.sum(X * X, axis=-1) + params.offset, params.degree)


def _linear_diag(params: LinearParams, X: Array) -> Array:
    return params.variance * jnp.sum(X * X, axis=-1)


_DIAGS: dict[Callable[..., Array], Callable[[Any, Array], Array]] = {
    se: _se_diag,
    ard_se: _ard_diag,
    polynomial: _poly_diag,
    linear: _linear_diag,
}


def kernel_diag(kernel: str | KernelFn, params: Any, X: ArrayLike) -> Array:
    """Diagonal ``k(x_i, x_i)`` of the kernel matrix, without forming it.

    Parameters
    ----------
    kernel : str or callable
        A name from :data:`KERNELS` or a kernel function. For a function that
        is not one of this module's, the diagonal is computed row by row as
        ``k(params, x_i[None], x_i[None])`` (``O(N)`` memory).
    params : NamedTuple
        The kernel's parameters.
    X : ArrayLike
        Inputs of shape ``(N, d)``.

    Returns
    -------
    Array
        Vector of shape ``(N,)``.
    """
    fn = get_kernel(kernel)
    X = _as_2d(X)
    diag = _DIAGS.get(fn)
    if diag is not None:
        return diag(params, X)
    return jax.vmap(lambda x: fn(params, x[None, :], x[None, :])[0, 0])(X)


# --------------------------------------------------------------------------
# unconstrained parametrisation
# --------------------------------------------------------------------------
_POSITIVE_FIELDS: dict[type, tuple[str, ...]] = {
    SEParams: ("lengthscale", "amplitude"),
    ARDParams: ("lengthscales", "amplitude"),
    PolyParams: ("offset",),
    LinearParams: ("variance",),
}


def _free_fields(params_type: type) -> tuple[str, ...]:
    try:
        return _POSITIVE_FIELDS[params_type]
    except KeyError:
        valid = ", ".join(t.__name__ for t in _POSITIVE_FIELDS)
        raise TypeError(
            f"no unconstrained parametrisation for {params_type.__name__}; "
            f"supported parameter types are {valid}"
        ) from None


def free_fields(params: KernelParams) -> tuple[str, ...]:
    """Names of the positive fields of ``params``, in declaration order: the keys of
    :func:`to_unconstrained` (without computing it, no device work), the fields ML-II learns and the
    theta sampler samples. ``("lengthscale", "amplitude")`` for :class:`SEParams`,
    ``("lengthscales", "amplitude")`` for :class:`ARDParams`, ``("offset",)`` for the polynomial
    kernel (its degree is fixed) and ``("variance",)`` for the linear kernel.

    Raises
    ------
    TypeError
        For a parameter container this module does not know.
    """
    return _free_fields(type(params))


def _softplus(x: ArrayLike) -> ArrayLike:
    """``log(1 + exp(x))``: in NumPy for host arrays (a fitted state on the host: nothing to compile),
    in JAX otherwise."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.logaddexp(x, np.zeros((), x.dtype))
    return jax.nn.softplus(jnp.asarray(x))


def _softplus_inverse(y: Array) -> Array:
    """``log(exp(y) - 1)`` written stably: ``y + log(-expm1(-y))``."""
    return y + jnp.log(-jnp.expm1(-y))


def _float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def to_unconstrained(params: KernelParams) -> dict[str, Array]:
    """Map the positive kernel parameters to the real line.

    Each positive field ``y`` becomes ``softplus^{-1}(y) = log(exp(y) - 1)``.
    Fixed fields (the polynomial ``degree``) are left out; they are taken
    back from ``like`` in :func:`from_unconstrained`. The result is a dict
    pytree, e.g. ``{"lengthscale": ..., "amplitude": ...}`` for
    :class:`SEParams`, suitable as the parameters of an Optax optimiser.

    Parameters
    ----------
    params : SEParams, ARDParams, PolyParams or LinearParams
        Parameters with strictly positive entries (a value of exactly ``0``
        maps to ``-inf`` and stays at ``0``).

    Returns
    -------
    dict of str to Array
        Unconstrained values keyed by field name.

    Raises
    ------
    TypeError
        For a parameter container this module does not know.
    """
    return {
        name: _softplus_inverse(_float(getattr(params, name)))
        for name in _free_fields(type(params))
    }


def from_unconstrained(raw: dict[str, ArrayLike], like: KernelParams) -> KernelParams:
    """Inverse of :func:`to_unconstrained`: apply ``softplus`` and rebuild the params.

    Parameters
    ----------
    raw : dict of str to ArrayLike
        Unconstrained values as returned by :func:`to_unconstrained`.
    like : SEParams, ARDParams, PolyParams or LinearParams
        Template giving the container type and the fixed fields (the
        polynomial ``degree``).

    Returns
    -------
    SEParams, ARDParams, PolyParams or LinearParams
        Parameters of the same type as ``like`` with positive fields
        ``softplus(raw[name])``.

    Raises
    ------
    TypeError
        For a parameter container this module does not know.
    """
    fields = _free_fields(type(like))
    return like._replace(**{name: _softplus(raw[name]) for name in fields})


def params_dict(params: KernelParams) -> dict[str, Any]:
    """Kernel parameters as a dict of Python floats / float64 arrays (the estimators' ``kernel_params_``).

    Parameters
    ----------
    params : SEParams, ARDParams, PolyParams or LinearParams
        Parameters, possibly device arrays.

    Returns
    -------
    dict of str to float, int or ndarray
        One entry per field; the polynomial ``degree`` as an int, ARD length-scales as an array.
    """
    out = {}
    for name, value in params._asdict().items():
        arr = np.asarray(value)
        out[name] = int(arr) if name == "degree" else (float(arr) if arr.ndim == 0 else arr.astype(np.float64))
    return out
