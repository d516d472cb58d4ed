"""The constrained parameters of a kernel: one table, one naming, the bijections to the real line and the
trainable mask, for every kernel of :mod:`bayes_maxmargin.core.kernels`, composed ones included.

A kernel's parameters are a NamedTuple (:class:`~bayes_maxmargin.core.kernels.SEParams`, ...) or, for a
composed kernel, nested ones (:class:`~bayes_maxmargin.core.kernels.SumParams`, ...). Every field is
named by its *path*, the field names from the outside in joined by ``"__"`` as scikit-learn does:
``"lengthscale"`` for :class:`~bayes_maxmargin.core.kernels.RBF`, ``"k1__lengthscale"`` and
``"k2__variance"`` for ``RBF() + Linear()``. Every field is positive except the polynomial degree,
which is a fixed integer (:data:`POSITIVE`).

Two bijections map the positive fields to the real line, one per kind of algorithm:

* :data:`SOFTPLUS`, ``theta = log(1 + exp(r))``, the coordinates in which S-BSVM's state holds the
  kernel fields and VB-EM's M-step moves them: near zero its gradient does not vanish as ``exp`` does,
  and far from zero it is the identity;
* :data:`LOG`, ``theta = exp(r)``, for ML-II in ECM / FITC and for the samplers: a change of the
  units of theta (of the data, for a length-scale) only shifts log theta, so the optimiser's steps
  do not depend on it (S-BSVM's Adam steps are taken in log theta too,
  :func:`~bayes_maxmargin.models.gp.svi.scale_free_adam`); the kernel prior is log-normal
  (:func:`~bayes_maxmargin.models.gp.model.kernel_prior`), so log theta is the coordinate in which the
  prior is Gaussian, the slice sampler of :mod:`~bayes_maxmargin.models.gp.gibbs_theta` moves and
  NumPyro's log-normal sites live.

:func:`trainable_fields` reads an estimator's ``learn_kernel`` into the tuple of paths that move, and
:func:`hold_fixed` is the one way an update keeps the others where they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayes_maxmargin.core.kernels import (
    ARDParams,
    ConstantParams,
    LinearParams,
    PolyParams,
    ProductParams,
    ScaledParams,
    SEParams,
    SumParams,
)

__all__ = ["LOG", "POSITIVE", "SOFTPLUS", "Bijection", "coordinates", "field_values", "free_fields", "from_unconstrained",
           "hold_fixed", "pack", "pack_values", "params_dict", "replace_fields", "template", "thaw",
           "to_unconstrained", "trainable_fields", "unpack"]

SEP = "__"

#: The positive fields of each parameter container; a composed container's other fields are nested
#: containers. Fields not listed (the polynomial ``degree``) are fixed.
POSITIVE: dict[type, tuple[str, ...]] = {
    SEParams: ("lengthscale", "amplitude"),
    ARDParams: ("lengthscales", "amplitude"),
    PolyParams: ("offset",),
    LinearParams: ("variance",),
    ConstantParams: ("variance",),
    SumParams: (),
    ProductParams: (),
    ScaledParams: ("variance",),
}
_NESTED: dict[type, tuple[str, ...]] = {SumParams: ("k1", "k2"), ProductParams: ("k1", "k2"), ScaledParams: ("k",)}


def _positive(cls: type) -> tuple[str, ...]:
    try:
        return POSITIVE[cls]
    except KeyError:
        valid = ", ".join(t.__name__ for t in POSITIVE)
        raise TypeError(
            f"no parametrisation for {cls.__name__}; supported parameter types are {valid}"
        ) from None


def _entries(params: Any, prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
    """``(path, value, positive)`` for every leaf field of ``params``, in declaration order."""
    cls = type(params)
    positive = _positive(cls)
    nested = _NESTED.get(cls, ())
    for name in cls._fields:
        value = getattr(params, name)
        if name in nested:
            yield from _entries(value, f"{prefix}{name}{SEP}")
        else:
            yield f"{prefix}{name}", value, name in positive


def free_fields(params: Any) -> tuple[str, ...]:
    """Paths of the positive fields of ``params``, in declaration order: the keys of
    :func:`to_unconstrained`, the fields ML-II learns and the theta sampler samples.

    ``("lengthscale", "amplitude")`` for :class:`~bayes_maxmargin.core.kernels.SEParams`, ``("offset",)``
    for the polynomial kernel (its degree is fixed), ``("k1__lengthscale", "k1__amplitude",
    "k2__variance")`` for the parameters of ``RBF() + Linear()``.

    Raises
    ------
    TypeError
        For a parameter container this module does not know.
    """
    return tuple(path for path, _, positive in _entries(params) if positive)


def field_values(params: Any) -> dict[str, Any]:
    """Every leaf field of ``params`` (fixed ones too) by path."""
    return {path: value for path, value, _ in _entries(params)}


def replace_fields(params: Any, values: Mapping[str, Any]) -> Any:
    """``params`` with the fields named by path in ``values`` replaced (the others kept).

    Raises
    ------
    KeyError
        For a path that names no field of ``params``.
    """
    direct, nested = {}, {}
    for path, value in values.items():
        head, _, rest = path.partition(SEP)
        if head not in type(params)._fields:
            raise KeyError(f"{path!r} names no field of {type(params).__name__}")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            direct[head] = value
    direct.update({head: replace_fields(getattr(params, head), sub) for head, sub in nested.items()})
    return params._replace(**direct)


# --------------------------------------------------------------------------- bijections
class Bijection(NamedTuple):
    """A map of the real line onto the positive reals: ``forward(r) = theta``, ``inverse(theta) = r``."""

    forward: Callable[[Any], Any]
    inverse: Callable[[Any], Any]


def _softplus(x: ArrayLike) -> ArrayLike:
    """``log(1 + exp(x))``: in NumPy for host arrays (a fitted state on the host: nothing to compile),
    in JAX otherwise."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.logaddexp(x, np.zeros((), x.dtype))
    return jax.nn.softplus(jnp.asarray(x))


def _softplus_inverse(y: ArrayLike) -> jax.Array:
    """``log(exp(y) - 1)`` written stably: ``y + log(-expm1(-y))``."""
    return y + jnp.log(-jnp.expm1(-y))


SOFTPLUS = Bijection(_softplus, _softplus_inverse)
"""``theta = softplus(r)``: S-BSVM's stored kernel fields and VB-EM's M-step."""
LOG = Bijection(jnp.exp, jnp.log)
"""``theta = exp(r)``: ML-II of ECM / FITC and the samplers."""


def _float(x: ArrayLike) -> jax.Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def to_unconstrained(params: Any, bijection: Bijection = SOFTPLUS) -> dict[str, jax.Array]:
    """The positive fields of ``params`` on the real line, by path.

    Each positive field ``theta`` becomes ``bijection.inverse(theta)`` (by default
    ``softplus^-1(theta) = log(exp(theta) - 1)``); fixed fields (the polynomial ``degree``) are left out
    and come back from ``like`` in :func:`from_unconstrained`. The result is a dict pytree, e.g.
    ``{"lengthscale": ..., "amplitude": ...}``, suitable as the parameters of an Optax optimiser.

    Raises
    ------
    TypeError
        For a parameter container this module does not know.
    """
    return {path: bijection.inverse(_float(value)) for path, value, positive in _entries(params) if positive}


def from_unconstrained(raw: Mapping[str, ArrayLike], like: Any, bijection: Bijection = SOFTPLUS) -> Any:
    """Inverse of :func:`to_unconstrained`: ``like`` with each positive field ``bijection.forward(raw[path])``
    (``like`` gives the container types and the fixed fields)."""
    return replace_fields(like, {path: bijection.forward(raw[path]) for path in free_fields(like)})


def pack_values(values: Mapping[str, ArrayLike], like: Any) -> jax.Array:
    """A per-field dict (e.g. a prior's ``loc``) as one vector in the layout of :func:`pack`, restricted to
    the fields it has: each broadcast to its shape in ``like``, raveled, concatenated in declaration order."""
    return jnp.concatenate([
        jnp.ravel(jnp.broadcast_to(values[path], np.shape(value)))
        for path, value, positive in _entries(like) if positive and path in values
    ])


def coordinates(like: Any, paths: Collection[str]) -> np.ndarray:
    """Indices into the vector of :func:`pack` of the fields named in ``paths`` (in declaration order)."""
    out, start = [], 0
    for path, value, positive in _entries(like):
        if positive:
            size = math.prod(np.shape(value))
            if path in paths:
                out.extend(range(start, start + size))
            start += size
    return np.asarray(out, dtype=np.int32)


def pack(params: Any, bijection: Bijection = LOG) -> jax.Array:
    """The positive fields of ``params`` on the real line as one vector (by default log theta), each
    raveled, in declaration order."""
    return jnp.concatenate([
        jnp.ravel(bijection.inverse(jnp.asarray(value, float)))
        for _, value, positive in _entries(params) if positive
    ])


def unpack(vector: jax.Array, like: Any, bijection: Bijection = LOG) -> Any:
    """Inverse of :func:`pack`: ``like`` with its positive fields from the matching slices of ``vector``
    (shapes, e.g. ``(d,)`` for ARD length-scales, and fixed fields from ``like``)."""
    values, start = {}, 0
    for path, value, positive in _entries(like):
        if positive:
            shape = np.shape(value)
            size = math.prod(shape)
            values[path] = bijection.forward(vector[start : start + size]).reshape(shape)
            start += size
    return replace_fields(like, values)


# --------------------------------------------------------------------------- the trainable mask
def trainable_fields(params: Any, learn: Any, name: str = "learn_kernel") -> tuple[str, ...]:
    """The paths of the fields that move, from an estimator's ``learn_kernel``: all positive fields (True),
    none (False) or the named ones.

    Raises
    ------
    ValueError
        Naming ``name`` and the offending value, for anything else or a path that is not a positive
        field of ``params``.
    """
    positive = free_fields(params)
    if isinstance(learn, (bool, np.bool_)):
        return positive if learn else ()
    if isinstance(learn, str) or not hasattr(learn, "__iter__"):
        raise ValueError(
            f"Invalid value for {name}: {learn!r} (must be True, False or a list of kernel fields among "
            f"{', '.join(positive)})"
        )
    paths = tuple(learn)
    for path in paths:
        if path not in positive:
            raise ValueError(
                f"Invalid value for {name}: {path!r} is not a learnable field of this kernel; valid fields "
                f"are {', '.join(positive)}"
            )
    return tuple(p for p in positive if p in paths)


def hold_fixed(raw: Mapping[str, Any], trainable: Collection[str]) -> dict[str, Any]:
    """``raw`` with a stopped gradient on every entry not in ``trainable``: the one way an ML-II, SVI or
    VB-EM update keeps fields fixed (with Adam or L-BFGS, a zero gradient leaves the entry exactly
    where it is). Host (NumPy) values have no gradient to stop and are returned as they are."""
    return {k: v if k in trainable or isinstance(v, (np.ndarray, np.generic)) else jax.lax.stop_gradient(v)
            for k, v in raw.items()}


# --------------------------------------------------------------------------- templates
def template(params: Any) -> tuple:
    """A hashable description of ``params``: its container types, the shapes of its positive fields and
    the values of its fixed fields, i.e. what compiled code depends on (the positive values are
    never read). Equal templates mean one compiled program serves both."""
    out = []
    nested = _NESTED.get(type(params), ())
    positive = _positive(type(params))
    for name in type(params)._fields:
        value = getattr(params, name)
        if name in nested:
            out.append((name, "nested", template(value)))
        elif name in positive:
            out.append((name, "shape", tuple(np.shape(value))))
        elif isinstance(value, (bool, int, float)):
            out.append((name, "value", value))
        else:
            arr = np.asarray(value)
            out.append((name, "array", (arr.dtype.str, arr.shape, tuple(arr.ravel().tolist()))))
    return (type(params), tuple(out))


def thaw(frozen: tuple) -> Any:
    """Inverse of :func:`template`, with zeros in the positive fields."""
    cls, entries = frozen
    values = {}
    for name, kind, value in entries:
        if kind == "nested":
            values[name] = thaw(value)
        elif kind == "shape":
            values[name] = np.zeros(value)
        elif kind == "value":
            values[name] = value
        else:
            dtype, shape, flat = value
            values[name] = np.asarray(flat, dtype=np.dtype(dtype)).reshape(shape)
    return cls(**values)


def params_dict(params: Any) -> dict[str, Any]:
    """Kernel parameters as a flat dict of Python floats / float64 arrays by path (the estimators'
    ``kernel_params_``): the polynomial ``degree`` as an int, ARD length-scales as an array."""
    out = {}
    for path, value, _ in _entries(params):
        arr = np.asarray(value)
        out[path] = int(arr) if path.rpartition(SEP)[2] == "degree" else (
            float(arr) if arr.ndim == 0 else arr.astype(np.float64))
    return out
