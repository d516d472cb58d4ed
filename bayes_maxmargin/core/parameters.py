"""The constrained parameters of a kernel: how a parameter container declares its fields, one naming,
the bijections to the real line, one flat vector, and the trainable mask.

A kernel's parameters are a NamedTuple (:class:`~bayes_maxmargin.core.kernels.SEParams`, ...) or, for a
composed kernel, nested ones (:class:`~bayes_maxmargin.core.kernels.SumParams`, ...). Each container
declares its fields in its class attribute ``properties``, a dict of :class:`ParameterProperties` by field
name (as GPJax's parameter types and dynamax's ``ParameterProperties`` do): :data:`POSITIVE` (a positive
real, moved on the real line through a bijection), :data:`STATIC` (a fixed value compiled into the
program: the polynomial degree) or :data:`NESTED` (another kernel's container). This module reads nothing
else, so a new kernel needs no table here.

Every field is named by its *path*, the field names from the outside in joined by ``"__"`` as
scikit-learn does: ``"lengthscale"`` for :class:`~bayes_maxmargin.core.kernels.RBF`,
``"k1__lengthscale"`` and ``"k2__variance"`` for ``RBF() + Linear()``.

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

:func:`flatten` gives the positive fields as one vector and the hashable :class:`Unflatten` that maps
a vector back (a static argument of compiled code); :func:`to_unconstrained` gives them as a dict by
path, the form in which S-BSVM's and VB-EM's states (and so their saved fits and checkpoints) hold
them. :func:`trainable_fields` reads an estimator's ``learn_kernel`` into the tuple of paths that move,
and :func:`hold_fixed` is the one way an update keeps the others where they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

__all__ = ["LOG", "NESTED", "POSITIVE", "SOFTPLUS", "STATIC", "Bijection", "ParameterProperties", "Unflatten",
           "field_values", "flatten", "free_fields", "from_unconstrained", "hold_fixed", "params_dict",
           "replace_fields", "static_fields", "to_unconstrained", "trainable_fields"]

SEP = "__"


class ParameterProperties(NamedTuple):
    """How a parameter container treats one of its fields.

    Attributes
    ----------
    positive : bool
        A positive real: learnt by ML-II, sampled, and moved on the real line through a
        :class:`Bijection`. False for a fixed value that compiled code depends on.
    nested : bool
        The field holds the parameter container of a component kernel (a sum's terms, a scaled kernel).
    """

    positive: bool = True
    nested: bool = False


POSITIVE = ParameterProperties()
"""A positive real field (a length-scale, an amplitude, a variance)."""
STATIC = ParameterProperties(positive=False)
"""A fixed field, compiled in (the polynomial degree)."""
NESTED = ParameterProperties(positive=False, nested=True)
"""A component kernel's parameter container."""


def _fixed_value(value: Any) -> Any:
    """A fixed field's value as pytree metadata: hashable, compared by value (a 0-d array as its Python
    scalar)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if np.ndim(value) == 0:
        return np.asarray(value).item()
    raise TypeError(f"a STATIC field holds a scalar compiled into the program, not an array of shape "
                    f"{np.shape(value)}")


def static_fields(cls: type) -> type:
    """Register the parameter container ``cls`` (a ``NamedTuple``) as a pytree whose :data:`STATIC` fields
    are metadata: their values are compiled into a program, never traced, so a container that crosses
    ``jit`` or a loop keeps them concrete (e.g. the polynomial degree, read by :func:`flatten`). Its
    other fields are the pytree's children. Use it as the container's class decorator.

    Examples
    --------
    >>> from typing import NamedTuple
    >>> import jax
    >>> @static_fields
    ... class PowerParams(NamedTuple):
    ...     power: int = 2
    ...     scale: float = 1.0
    ...     properties = {"power": STATIC, "scale": POSITIVE}
    >>> jax.tree_util.tree_leaves(PowerParams(3, 0.5))
    [0.5]
    """
    fixed = tuple(name for name, prop in cls.properties.items() if not prop.positive and not prop.nested)
    children = tuple(name for name in cls._fields if name not in fixed)

    def flatten(params: Any) -> tuple[list[Any], tuple[Any, ...]]:
        return [getattr(params, name) for name in children], tuple(_fixed_value(getattr(params, n)) for n in fixed)

    def unflatten(aux: tuple[Any, ...], leaves: Any) -> Any:
        return cls(**dict(zip(children, leaves)), **dict(zip(fixed, aux)))

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    return cls


def _properties(params: Any) -> dict[str, ParameterProperties]:
    try:
        return type(params).properties
    except AttributeError:
        raise TypeError(
            f"no parametrisation for {type(params).__name__}: a kernel's parameter container declares its "
            f"fields in a class attribute 'properties' (see bayes_maxmargin.core.parameters)"
        ) from None


def _entries(params: Any, prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
    """``(path, value, positive)`` for every leaf field of ``params``, in declaration order."""
    for name, prop in _properties(params).items():
        value = getattr(params, name)
        if prop.nested:
            yield from _entries(value, f"{prefix}{name}{SEP}")
        else:
            yield f"{prefix}{name}", value, prop.positive


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


def _structure(params: Any) -> tuple:
    """A hashable description of ``params``: its container types, the shapes of its positive fields and
    the values of its fixed fields, i.e. what compiled code depends on (the positive values are not read)."""
    out = []
    for name, prop in _properties(params).items():
        value = getattr(params, name)
        if prop.nested:
            out.append((name, "nested", _structure(value)))
        elif prop.positive:
            out.append((name, "shape", tuple(np.shape(value))))
        elif isinstance(value, (bool, int, float)):
            out.append((name, "value", value))
        else:
            arr = np.asarray(value)
            out.append((name, "array", (arr.dtype.str, arr.shape, tuple(arr.ravel().tolist()))))
    return (type(params), tuple(out))


def _rebuild(structure: tuple) -> Any:
    """The container described by :func:`_structure`, with zeros in the positive fields."""
    cls, entries = structure
    values = {}
    for name, kind, value in entries:
        if kind == "nested":
            values[name] = _rebuild(value)
        elif kind == "shape":
            values[name] = np.zeros(value)
        elif kind == "value":
            values[name] = value
        else:
            dtype, shape, flat = value
            values[name] = np.asarray(flat, dtype=np.dtype(dtype)).reshape(shape)
    return cls(**values)


@dataclass(frozen=True)
class Unflatten:
    """The inverse of :func:`flatten` for one parameter structure (container types, shapes of the positive
    fields, values of the fixed ones) and one bijection. It hashes by that structure, so it is a static
    argument of compiled code: one program serves every value of the same kernel.

    Calling it on a vector gives the parameter container; :attr:`paths`, :meth:`coordinates` and
    :meth:`layout` describe the vector's entries.
    """

    structure: tuple
    bijection: Bijection

    @classmethod
    def of(cls, params: Any, bijection: Bijection = LOG) -> Unflatten:
        """The Unflatten of :func:`flatten` ``(params, bijection)``, without computing the vector (host
        work only: cheap enough to serve as a hash key on every call of a compiled function)."""
        return cls(_structure(params), bijection)

    @cached_property
    def like(self) -> Any:
        """The container with zeros in its positive fields (its types, shapes and fixed fields)."""
        return _rebuild(self.structure)

    @cached_property
    def _fields(self) -> tuple[tuple[str, slice, tuple[int, ...]], ...]:
        """``(path, slice of the vector, shape)`` of each positive field, in the vector's order."""
        out, start = [], 0
        for path, value, positive in _entries(self.like):
            if positive:
                shape = tuple(np.shape(value))
                out.append((path, slice(start, start + math.prod(shape)), shape))
                start += math.prod(shape)
        return tuple(out)

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths of the positive fields, in the order of the vector (:func:`free_fields`)."""
        return tuple(path for path, _, _ in self._fields)

    @property
    def size(self) -> int:
        """The length of the vector."""
        return self._fields[-1][1].stop if self._fields else 0

    def __call__(self, vector: jax.Array) -> Any:
        """The container whose positive fields are ``bijection.forward`` of the matching slices of
        ``vector`` (each reshaped to its field's shape, e.g. ``(d,)`` for ARD length-scales)."""
        return replace_fields(self.like, {path: self.bijection.forward(vector[where]).reshape(shape)
                                          for path, where, shape in self._fields})

    def coordinates(self, paths: Collection[str]) -> np.ndarray:
        """Indices into the vector of the fields named in ``paths`` (in the vector's order)."""
        picked = [range(where.start, where.stop) for path, where, _ in self._fields if path in paths]
        return np.asarray([i for block in picked for i in block], dtype=np.int32)

    def hold_fixed(self, vector: jax.Array, trainable: Collection[str]) -> jax.Array:
        """``vector`` with a stopped gradient on every entry whose field is not in ``trainable``: the
        flat-vector form of :func:`hold_fixed`."""
        moves = np.zeros(np.shape(vector)[-1], bool)
        moves[self.coordinates(trainable)] = True
        return jnp.where(moves, vector, jax.lax.stop_gradient(vector))

    def layout(self, values: Mapping[str, ArrayLike]) -> jax.Array:
        """A per-field dict (e.g. a prior's ``loc``) as one vector in the vector's layout, restricted to the
        fields it has: each broadcast to its field's shape, raveled, concatenated in order."""
        return jnp.concatenate([jnp.ravel(jnp.broadcast_to(values[path], shape))
                                for path, _, shape in self._fields if path in values])


def flatten(params: Any, bijection: Bijection = LOG) -> tuple[jax.Array, Unflatten]:
    """The positive fields of ``params`` on the real line as one vector (by default log theta), each
    raveled, in declaration order, and the :class:`Unflatten` that maps such a vector back.

    Examples
    --------
    >>> from bayes_maxmargin.core.kernels import RBF, Polynomial
    >>> import numpy as np
    >>> params = (RBF(lengthscale=2.0) + Polynomial(degree=3)).init_params(np.zeros((1, 2)))
    >>> vector, unflatten = flatten(params)
    >>> unflatten.paths
    ('k1__lengthscale', 'k1__amplitude', 'k2__offset')
    >>> float(unflatten(vector).k1.lengthscale), unflatten(vector).k2.degree
    (2.0, 3)
    """
    vector = jnp.concatenate([
        jnp.ravel(bijection.inverse(_float(value))) for _, value, positive in _entries(params) if positive
    ])
    return vector, Unflatten.of(params, bijection)


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


def params_dict(params: Any) -> dict[str, Any]:
    """Kernel parameters as a flat dict of Python floats / float64 arrays by path (the estimators'
    ``kernel_params_``): the polynomial ``degree`` as an int, ARD length-scales as an array."""
    out = {}
    for path, value, _ in _entries(params):
        arr = np.asarray(value)
        out[path] = int(arr) if path.rpartition(SEP)[2] == "degree" else (
            float(arr) if arr.ndim == 0 else arr.astype(np.float64))
    return out
