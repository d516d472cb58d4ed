"""Covariance functions written as pure JAX functions of ``(params, X1, X2)``.

Every kernel in this module has the signature ``k(params, X1, X2) -> K`` where
``X1`` has shape ``(N, d)``, ``X2`` has shape ``(M, d)`` and ``K`` has shape
``(N, M)``. Parameters live in small :class:`~typing.NamedTuple` containers, so
they are JAX pytrees: a kernel can be jit-compiled, vmapped over a batch of
parameters and differentiated with respect to its (continuous) parameters.

The kernels are

==============  ==========================================================
name            formula
==============  ==========================================================
``"se"``        ``a * exp(-||x - x'||^2 / theta^2)``            (:func:`se`)
``"rbf"``       alias of ``"se"``
``"ard"``       ``a * exp(-sum_j (x_j - x'_j)^2 / theta_j^2)``  (:func:`ard_se`)
``"poly"``      ``(x^T x' + c)^p``                          (:func:`polynomial`)
``"linear"``    ``v * x^T x'``                                  (:func:`linear`)
``"constant"``  ``v``                                           (:func:`constant`)
==============  ==========================================================

The squared-exponential kernel follows Henao et al. (2014) exactly: there is
no factor ``1/2`` in the exponent, so ``theta`` here equals ``sqrt(2)`` times
the lengthscale of the ``exp(-r^2 / (2 l^2))`` convention.

Each function has an object form (:class:`RBF`, :class:`ARD`, :class:`Polynomial`,
:class:`Linear`, :class:`Constant`) that holds initial parameter values and composes: ``RBF() + Linear()``,
``RBF() * Polynomial()``, ``0.5 * RBF()`` (:class:`Sum`, :class:`Product`, :class:`Scaled`).
:mod:`bayes_maxmargin.core.parameters` names, constrains and transforms the parameters of any
of them.

References
----------
R. Henao, X. Yuan and L. Carin (2014). Bayesian nonlinear support vector
machines and discriminative factor modeling. NeurIPS 27.

F. Wenzel, T. Galy-Fajou, M. Deutsch and M. Kloft (2017). Bayesian nonlinear
support vector machines for big data. ECML-PKDD.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, NamedTuple, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from bayes_maxmargin.core.checks import InvalidParameterError, _fmt_value, check_scalar_param
from bayes_maxmargin.core.parameters import (
    NESTED,
    POSITIVE,
    SEP,
    STATIC,
    field_values,
    replace_fields,
    static_fields,
)
from bayes_maxmargin.core.parameters import params_dict as _params_dict  # params_dict itself warns (below)

__all__ = ["ARD", "ARDParams", "Constant", "ConstantParams", "KERNELS", "Kernel", "KernelFn", "KernelParams", "Linear",
           "LinearParams", "PolyParams", "Polynomial", "Product", "ProductParams", "RBF", "SEParams", "Scaled",
           "ScaledParams", "Sum", "SumParams", "ard_se", "as_kernel", "check_kernel_params", "constant",
           "feature_scale", "get_kernel", "kernel_diag", "kernel_name", "linear", "median_distance", "polynomial",
           "se", "squared_distance"]

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

    properties = {"lengthscale": POSITIVE, "amplitude": POSITIVE}


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

    properties = {"lengthscales": POSITIVE, "amplitude": POSITIVE}


@static_fields
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

    properties = {"degree": STATIC, "offset": POSITIVE}


class LinearParams(NamedTuple):
    """Parameters of the linear kernel :func:`linear`.

    Attributes
    ----------
    variance : ArrayLike
        Positive scalar ``v`` in ``v * x^T x'``. Default ``1.0``.
    """

    variance: ArrayLike = 1.0

    properties = {"variance": POSITIVE}


class ConstantParams(NamedTuple):
    """Parameters of the constant kernel :func:`constant`.

    Attributes
    ----------
    variance : ArrayLike
        Positive scalar ``v``, the prior variance of a constant shift of f (an intercept).
        Default ``1.0``.
    """

    variance: ArrayLike = 1.0

    properties = {"variance": POSITIVE}


KernelParams: TypeAlias = Any
"""Any of the parameter containers of this module (a leaf's, or nested :class:`SumParams`, ...)."""

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


@jax.custom_jvp
def _over_squared(d2: Array, theta: Array) -> Array:
    """``d2 / theta^2``, differentiated as ``-2 (d2 / theta^2) / theta`` in theta: autodiff of the quotient
    forms ``theta^4``, which leaves float64's normal numbers for a length-scale below 1.2e-77 (float32's
    below 3.3e-10), where inputs in such units still have squared distances of the order of ``theta^2``."""
    return d2 / (theta * theta)


@_over_squared.defjvp
def _over_squared_jvp(primals, tangents):
    (d2, theta), (d_d2, d_theta) = primals, tangents
    out = d2 / (theta * theta)
    return out, d_d2 / (theta * theta) - 2.0 * out * (d_theta / theta)


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
    X1, X2 : ArrayLike
        Inputs of shapes ``(N, d)`` and ``(M, d)``.

    Returns
    -------
    Array
        Kernel matrix of shape ``(N, M)``.
    """
    theta = jnp.asarray(params.lengthscale)
    return params.amplitude * jnp.exp(-_over_squared(squared_distance(X1, X2), theta))


def ard_se(params: ARDParams, X1: ArrayLike, X2: ArrayLike) -> Array:
    """Squared-exponential kernel with one lengthscale per input dimension (ARD).

    ``k(x, x') = a * exp(-sum_j (x_j - x'_j)^2 / theta_j^2)``

    With all ``theta_j`` equal to ``theta`` it coincides with :func:`se`. Inputs and result as in
    :func:`se`; ``params`` is an :class:`ARDParams`: ``lengthscales`` (shape ``(d,)``, positive) and
    ``amplitude``.
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

    With the default offset ``c = 1`` this is ``(x^T x' + 1)^p``. Inputs and result as in
    :func:`se`; ``params`` is a :class:`PolyParams`: ``degree`` (fixed integer ``p >= 0``) and
    ``offset`` (``c >= 0``).
    """
    base = _dot(_as_2d(X1), _as_2d(X2)) + params.offset
    return _power(base, params.degree)


def linear(params: LinearParams, X1: ArrayLike, X2: ArrayLike) -> Array:
    """Linear kernel ``k(x, x') = v * x^T x'``.

    Inputs and result as in :func:`se`; ``params`` is a :class:`LinearParams`: ``variance``
    (``v > 0``).
    """
    return params.variance * _dot(_as_2d(X1), _as_2d(X2))


def constant(params: ConstantParams, X1: ArrayLike, X2: ArrayLike) -> Array:
    """Constant kernel ``k(x, x') = v``: a GP with this covariance is one shift ``b ~ N(0, v)`` of f
    everywhere, so ``RBF() + Constant()`` adds the intercept of an SVM to a zero-mean GP, with its
    prior variance learnt with the rest.

    Inputs and result as in :func:`se`; ``params`` is a :class:`ConstantParams`: ``variance``
    (``v > 0``).
    """
    X1, X2 = _as_2d(X1), _as_2d(X2)
    return jnp.full((X1.shape[0], X2.shape[0]), params.variance, dtype=jnp.result_type(X1, X2))


# --------------------------------------------------------------------------
# composed kernels: parameter containers
# --------------------------------------------------------------------------
class SumParams(NamedTuple):
    """Parameters of :class:`Sum`: those of its two terms (field paths ``k1__...``, ``k2__...``)."""

    k1: Any
    k2: Any

    properties = {"k1": NESTED, "k2": NESTED}


class ProductParams(NamedTuple):
    """Parameters of :class:`Product`: those of its two factors (field paths ``k1__...``, ``k2__...``)."""

    k1: Any
    k2: Any

    properties = {"k1": NESTED, "k2": NESTED}


class ScaledParams(NamedTuple):
    """Parameters of :class:`Scaled`: the positive weight ``variance`` and those of the scaled kernel
    (field paths ``variance``, ``k__...``)."""

    variance: ArrayLike
    k: Any

    properties = {"variance": POSITIVE, "k": NESTED}


# --------------------------------------------------------------------------
# diagonals
# --------------------------------------------------------------------------
def _ones(X: Array, scale: ArrayLike) -> Array:
    return jnp.asarray(scale) * jnp.ones(X.shape[0], dtype=X.dtype)


def _se_diag(params: SEParams | ARDParams, X: Array) -> Array:
    return _ones(X, params.amplitude)


def _poly_diag(params: PolyParams, X: Array) -> Array:
    return _power(jnp.sum(X * X, axis=-1) + params.offset, params.degree)


def _linear_diag(params: LinearParams, X: Array) -> Array:
    return params.variance * jnp.sum(X * X, axis=-1)


def _constant_diag(params: ConstantParams, X: Array) -> Array:
    return _ones(X, params.variance)


# --------------------------------------------------------------------------
# kernel objects and their algebra
# --------------------------------------------------------------------------
def median_distance(X: ArrayLike, max_rows: int = 1000) -> float:
    """Median Euclidean distance between distinct rows of ``X`` (on a seeded subsample of ``max_rows``):
    the default length-scale of :class:`RBF` and :class:`ARD`. ``1.0`` when all rows coincide."""
    from scipy.spatial.distance import squareform
    from sklearn.metrics import pairwise_distances

    X = np.asarray(X)
    if X.shape[0] > max_rows:
        X = X[np.random.default_rng(0).choice(X.shape[0], max_rows, replace=False)]
    d = squareform(pairwise_distances(X), checks=False)  # the upper triangle, row by row
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def feature_scale(X: ArrayLike) -> Array:
    """The spread of each column of ``X`` (shape ``(d,)``), its standard deviation: the unit in which the
    optimisers move inducing points, so that their steps do not depend on the units of the data. A constant
    column takes the largest spread of the others, and 1 where every column is constant."""
    X = _as_2d(X)
    sd = jnp.std(X, axis=0)
    sd = jnp.where(sd > 0, sd, jnp.max(sd))
    return jnp.where(sd > 0, sd, 1.0).astype(X.dtype)


@dataclass(frozen=True)
class Kernel:
    """A covariance function as an object: callable as ``k(params, X1, X2)`` like the functions of this
    module, holding the initial values of its parameters, and composable.

    ``k1 + k2`` is :class:`Sum`, ``k1 * k2`` :class:`Product` and ``c * k`` :class:`Scaled` (a kernel with a
    learnt positive weight ``c``), so the multiple-kernel covariance ``k = sum_j gamma_j k_j(theta_j)`` of
    Wenzel et al. (2017), App. A.3, is ``c1 * RBF() + c2 * Polynomial()`` and ML-II learns every
    ``gamma_j`` and ``theta_j``. The parameters of a composed kernel are nested containers
    (:class:`SumParams`, ...); :mod:`bayes_maxmargin.core.parameters` names their fields by path, e.g.
    ``"k1__lengthscale"`` for the length-scale of the first term, as scikit-learn does.

    Kernel objects compare and hash by value, so they can be static arguments of compiled functions;
    :meth:`structure` drops the initial values (one compiled program serves them all).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_maxmargin.core.kernels import RBF, Linear
    >>> k = RBF(lengthscale=2.0) + 0.5 * Linear()
    >>> X = np.eye(3)
    >>> params = k.init_params(X)
    >>> k(params, X, X).shape
    (3, 3)
    """

    def __call__(self, params: Any, X1: ArrayLike, X2: ArrayLike) -> Array:
        raise NotImplementedError

    def diag(self, params: Any, X: ArrayLike) -> Array:
        """``k(x_i, x_i)`` for the rows of ``X`` (shape ``(N,)``), without forming the matrix."""
        raise NotImplementedError

    def init_params(self, X: ArrayLike, lengthscale: float | None = None) -> Any:
        """The parameter container at this object's values; ``None`` values take the defaults for the
        training inputs ``X``: length-scales at ``lengthscale``, or by default at :func:`median_distance`."""
        raise NotImplementedError

    def structure(self) -> Kernel:
        """This kernel with every value at its default: what compiled code depends on."""
        raise NotImplementedError

    def __add__(self, other: Kernel) -> Kernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        return Sum(self, other)

    def __mul__(self, other: Kernel | float) -> Kernel:
        if isinstance(other, Kernel):
            return Product(self, other)
        if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, bool):
            return Scaled(self, float(other))
        return NotImplemented

    def __rmul__(self, other: float) -> Kernel:
        return self.__mul__(other) if not isinstance(other, Kernel) else NotImplemented


@dataclass(frozen=True)
class _Leaf(Kernel):
    """A kernel of this module's functions: ``function`` computes the matrix, ``diagonal`` its diagonal,
    and the dataclass fields are those of its parameter container ``Params``."""

    function: ClassVar[KernelFn]
    diagonal: ClassVar[Callable[[Any, Array], Array]]
    Params: ClassVar[type]

    def __call__(self, params: Any, X1: ArrayLike, X2: ArrayLike) -> Array:
        return type(self).function(params, X1, X2)

    def diag(self, params: Any, X: ArrayLike) -> Array:
        return type(self).diagonal(params, _as_2d(X))

    def init_params(self, X: ArrayLike, lengthscale: float | None = None) -> Any:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("lengthscale", "lengthscales"):
            if name in values and values[name] is None:
                ell = median_distance(X) if lengthscale is None else lengthscale
                values[name] = ell if name == "lengthscale" else np.full(np.shape(X)[1], ell)
        return self.Params(**values)

    def structure(self) -> Kernel:
        return type(self)()

    def __repr__(self) -> str:
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                         if getattr(self, f.name) != f.default)
        return f"{type(self).__name__}({args})"


@dataclass(frozen=True, repr=False)
class RBF(_Leaf):
    """Squared exponential :func:`se`, ``amplitude * exp(-||x - x'||^2 / lengthscale^2)``; ``lengthscale=None``
    starts at the median distance between training points."""

    lengthscale: float | None = None
    amplitude: float = 1.0

    function = staticmethod(se)
    diagonal = staticmethod(_se_diag)
    Params = SEParams


@dataclass(frozen=True, repr=False)
class ARD(_Leaf):
    """Squared exponential with one length-scale per input dimension (:func:`ard_se`); ``lengthscales``
    a sequence of ``d`` values, one value for all, or ``None`` (the median distance)."""

    lengthscales: float | tuple[float, ...] | None = None
    amplitude: float = 1.0

    function = staticmethod(ard_se)
    diagonal = staticmethod(_se_diag)
    Params = ARDParams

    def __post_init__(self) -> None:
        if self.lengthscales is not None and np.ndim(self.lengthscales) > 0:
            object.__setattr__(self, "lengthscales", tuple(float(v) for v in np.ravel(self.lengthscales)))

    def init_params(self, X: ArrayLike, lengthscale: float | None = None) -> Any:
        """As :meth:`Kernel.init_params`; a ValueError names the length-scales given and the number of input
        dimensions (the columns of ``X``) when they differ."""
        params = super().init_params(X, lengthscale)
        d, given = np.shape(X)[1], np.size(params.lengthscales)
        if given not in (1, d):
            raise ValueError(
                f"Invalid value for lengthscales of {self!r}: {given} length-scales for {d} input dimensions "
                f"(give one per input dimension, or one for all)")
        return params._replace(lengthscales=np.broadcast_to(params.lengthscales, (d,)).copy())


@dataclass(frozen=True, repr=False)
class Polynomial(_Leaf):
    """Polynomial kernel :func:`polynomial`, ``(x^T x' + offset)^degree`` (``degree`` fixed)."""

    degree: int = 2
    offset: float = 1.0

    function = staticmethod(polynomial)
    diagonal = staticmethod(_poly_diag)
    Params = PolyParams

    def structure(self) -> Kernel:
        return Polynomial(degree=self.degree)  # the degree is compiled in


@dataclass(frozen=True, repr=False)
class Linear(_Leaf):
    """Linear kernel :func:`linear`, ``variance * x^T x'``."""

    variance: float = 1.0

    function = staticmethod(linear)
    diagonal = staticmethod(_linear_diag)
    Params = LinearParams


@dataclass(frozen=True, repr=False)
class Constant(_Leaf):
    """Constant kernel :func:`constant`, ``variance`` (an intercept of prior variance ``variance``)."""

    variance: float = 1.0

    function = staticmethod(constant)
    diagonal = staticmethod(_constant_diag)
    Params = ConstantParams


@dataclass(frozen=True)
class _Binary(Kernel):
    """Two kernels combined entry by entry (``_combine``), with parameters ``(k1, k2)``."""

    k1: Kernel
    k2: Kernel
    Params: ClassVar[type]

    def _combine(self, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def __call__(self, params: Any, X1: ArrayLike, X2: ArrayLike) -> Array:
        return self._combine(self.k1(params.k1, X1, X2), self.k2(params.k2, X1, X2))

    def diag(self, params: Any, X: ArrayLike) -> Array:
        return self._combine(self.k1.diag(params.k1, X), self.k2.diag(params.k2, X))

    def init_params(self, X: ArrayLike, lengthscale: float | None = None) -> Any:
        return self.Params(self.k1.init_params(X, lengthscale), self.k2.init_params(X, lengthscale))

    def structure(self) -> Kernel:
        return type(self)(self.k1.structure(), self.k2.structure())


@dataclass(frozen=True)
class Sum(_Binary):
    """``k1(x, x') + k2(x, x')``, with parameters :class:`SumParams`."""

    Params = SumParams

    def _combine(self, a: Array, b: Array) -> Array:
        return a + b

    def __repr__(self) -> str:
        return f"{self.k1!r} + {self.k2!r}"


@dataclass(frozen=True)
class Product(_Binary):
    """``k1(x, x') * k2(x, x')`` (entry by entry), with parameters :class:`ProductParams`."""

    Params = ProductParams

    def _combine(self, a: Array, b: Array) -> Array:
        return a * b

    def __repr__(self) -> str:
        return f"({self.k1!r}) * ({self.k2!r})"



@dataclass(frozen=True)
class Scaled(Kernel):
    """``variance * k(x, x')`` with a positive weight ``variance`` learnt with the rest
    (Wenzel et al. 2017, App. A.3), parameters :class:`ScaledParams`."""

    k: Kernel
    variance: float = 1.0

    def __call__(self, params: ScaledParams, X1: ArrayLike, X2: ArrayLike) -> Array:
        return params.variance * self.k(params.k, X1, X2)

    def diag(self, params: ScaledParams, X: ArrayLike) -> Array:
        return params.variance * self.k.diag(params.k, X)

    def init_params(self, X: ArrayLike, lengthscale: float | None = None) -> ScaledParams:
        return ScaledParams(self.variance, self.k.init_params(X, lengthscale))

    def structure(self) -> Kernel:
        return Scaled(self.k.structure())

    def __repr__(self) -> str:
        return f"{self.variance!r} * ({self.k!r})"


# --------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------
KERNELS: dict[str, type[_Leaf]] = {
    "rbf": RBF,
    "se": RBF,
    "ard": ARD,
    "poly": Polynomial,
    "linear": Linear,
    "constant": Constant,
}
"""The kernels by name, the one table of them: ``"rbf"`` and ``"se"`` are the same kernel. Each class
carries its function, its diagonal and its parameter container."""


def as_kernel(kernel: str | Kernel) -> Kernel:
    """The kernel object of a name in :data:`KERNELS` (``"rbf"`` -> ``RBF()``), or ``kernel`` itself."""
    if isinstance(kernel, Kernel):
        return kernel
    key = kernel.lower() if isinstance(kernel, str) else kernel
    try:
        return KERNELS[key]()
    except (KeyError, TypeError):
        valid = ", ".join(repr(k) for k in sorted(KERNELS))
        raise ValueError(f"unknown kernel {kernel!r}; valid names are {valid}") from None


def kernel_name(kernel: str | Kernel) -> str:
    """A name for messages and metadata: the string itself, or the kernel object's ``repr``."""
    return kernel if isinstance(kernel, str) else repr(kernel)


def get_kernel(name: str | Kernel | KernelFn) -> Kernel | KernelFn:
    """The kernel that compiled code calls: a name's or a :class:`Kernel`'s object at its default values.

    Parameters
    ----------
    name : str, Kernel or callable
        One of the keys of :data:`KERNELS` (case-insensitive), a :class:`Kernel` (returned as its
        :meth:`~Kernel.structure`, so that kernels differing only in initial values share compiled
        code), one of this module's functions (its kernel object) or another function
        ``k(params, X1, X2)``, returned unchanged.

    Returns
    -------
    Kernel or callable
        Callable as ``k(params, X1, X2)``.

    Raises
    ------
    ValueError
        If ``name`` is not a known kernel name; the message lists the valid
        names.
    """
    if isinstance(name, Kernel):
        return name.structure()
    if callable(name):
        leaf = next((cls for cls in KERNELS.values() if cls.function is name), None)
        return name if leaf is None else leaf()
    return as_kernel(name)


def kernel_diag(kernel: str | KernelFn, params: Any, X: ArrayLike) -> Array:
    """Diagonal ``k(x_i, x_i)`` of the kernel matrix, without forming it.

    Parameters
    ----------
    kernel : str, Kernel or callable
        A name from :data:`KERNELS`, a :class:`Kernel` or a kernel function. For a function that
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
    if isinstance(fn, Kernel):
        return fn.diag(params, X)
    return jax.vmap(lambda x: fn(params, x[None, :], x[None, :])[0, 0])(X)


# ============================================================================ the user's kernel parameters
def check_kernel_params(kernel: Any, kernel_params: Any, defaults: Any) -> Any:
    """The kernel parameters of an estimator: ``defaults`` overridden by the user's ``kernel_params``,
    every field validated.

    Parameters
    ----------
    kernel : str or Kernel
        The kernel's name or object (:mod:`bayes_maxmargin.core.kernels`), used in the messages.
    kernel_params : dict, NamedTuple or None
        The estimator's parameter: a subset of the fields of ``defaults``, by path for a composed
        kernel (``{"k1__lengthscale": 2.0}``, :mod:`bayes_maxmargin.core.parameters`).
    defaults : NamedTuple
        The kernel's parameter container at its initial values (:mod:`bayes_maxmargin.core.kernels`).

    Returns
    -------
    NamedTuple
        ``defaults`` with the user's fields, validated: ``degree`` an integer >= 1, ``offset`` >= 0,
        ``lengthscales`` a positive number or one positive entry per input dimension, every other
        field a positive number.

    Raises
    ------
    InvalidParameterError
        Naming the field (and for a composed kernel its component), for example ``"Invalid key 'gamma'
        in kernel_params for kernel='rbf'; valid keys are lengthscale, amplitude"`` or ``"Invalid value
        for k2__variance (Linear) of kernel RBF() + Linear(variance=-1.0): -1.0 (must be a real number
        > 0.0)"``.
    """
    kernel_obj, kernel = kernel, kernel_name(kernel)
    current = field_values(defaults)
    fields = ", ".join(current)
    if hasattr(kernel_params, "_asdict"):
        # a kernel's parameter container (its fields by path), or another NamedTuple (its fields by name)
        kernel_params = _params_dict(kernel_params) if hasattr(kernel_params, "properties") else kernel_params._asdict()
    if kernel_params is not None and not isinstance(kernel_params, Mapping):
        raise InvalidParameterError(
            f"Invalid value for kernel_params: {_fmt_value(kernel_params)} (must be None or a dict of the fields "
            f"{fields} of the {kernel!r} kernel)"
        )
    kernel_params = dict(kernel_params or {})
    for name in kernel_params:
        if name not in current:
            raise InvalidParameterError(
                f"Invalid key {name!r} in kernel_params for kernel={kernel!r}; valid keys are {fields}"
            )
    values = {}
    for path, value in current.items():
        if path in kernel_params:
            label = f"kernel_params[{path!r}]"
        elif SEP in path:
            label = f"{path} ({_component(kernel_obj, path)}) of kernel {kernel}"
        else:
            label = f"{path} of kernel {kernel}"
        name = path.rpartition(SEP)[2]
        values[path] = _check_kernel_value(name, kernel_params.get(path, value), np.shape(value), label)
    return replace_fields(defaults, values)


def _component(kernel: Any, path: str) -> str:
    """The class name of the component of a composed kernel object that ``path`` leads into."""
    for part in path.split(SEP)[:-1]:
        kernel = getattr(kernel, part, None)
    return type(kernel).__name__


def _check_kernel_value(name: str, value: Any, shape: tuple[int, ...], label: str) -> Any:
    if name == "degree":
        return check_scalar_param(label, value, kind="int", low=1)
    try:
        arr = None if isinstance(value, (str, bytes)) else np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        arr = None  # reported by check_scalar_param below
    if shape and arr is not None and arr.ndim == 1:
        if arr.shape != shape:
            raise InvalidParameterError(
                f"Invalid value for {label}: {arr.shape[0]} length-scales for {shape[0]} input dimensions"
            )
        bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))
        if bad.size:
            raise InvalidParameterError(
                f"Invalid value for {label}: entry {bad[0]} is {arr[bad[0]]} (must be positive and finite)"
            )
        return arr
    value = check_scalar_param(label, value, low=0.0, low_inclusive=name == "offset")  # offset 0: homogeneous
    return np.full(shape, value) if shape else value


#: Names that moved to :mod:`bayes_maxmargin.core.parameters`; still importable from here, with a warning.
_MOVED_TO_PARAMETERS = ("free_fields", "from_unconstrained", "params_dict", "to_unconstrained")


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_PARAMETERS:
        import warnings

        from bayes_maxmargin.core import parameters

        warnings.warn(f"bayes_maxmargin.core.kernels.{name} moved to bayes_maxmargin.core.parameters.{name}",
                      DeprecationWarning, stacklevel=2)
        return getattr(parameters, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

