"""One-vs-rest multi-class fits: the K binary problems of a K-class problem run as one program.

A K-class problem (K > 2) is fitted as K binary problems, class k (coded +1) against the rest
(-1), each by exactly the binary code path of the estimator (same model, same inference, same
post-processing), in sub-estimators ``estimators_[k]``. What is shared is the expensive part:

* every solver call of a binary fit goes through :func:`solve`. During a one-vs-rest fit the K
  binary fits are run up to their next solver call, which is recorded instead of executed
  (:class:`BatchRequest`); the K recorded calls are then executed as ONE batched call, and the
  fits are re-run with the results replayed (a fit's host-side preparation is cheap and
  deterministic, so re-running it is the simplest way to keep one code path for binary and
  multi-class problems);
* a batched call applies ``jax.vmap`` to a jitted solver (EM, ECM, FITC, VB, batch VI, NUTS) over the arguments that
  differ between the classes (labels, keys, label-dependent starting points) with the others
  shared, so all classes run in one compiled program;
* a batched :func:`~bayes_maxmargin.engine.mcmc.run_chains` stacks the chains of all classes
  into one run of ``K * num_chains`` chains: the per-class data (labels) ride in the chain state,
  the shared data (design, kernel matrix) stay in ``data``, and every chain keeps the key of its
  binary run, so chunking, checkpoints and the non-finite check work unchanged (a non-finite
  chain is named by its index ``k * num_chains + c``);
* a batched SVI run (:func:`~bayes_maxmargin.models.gp.svi.svi_gp`,
  :func:`~bayes_maxmargin.models.linear.svi.svi_linear`) passes the K label vectors as one (K, N)
  array (kept on the host with the inputs) to the same host-side minibatch loop, whose compiled
  chunk is ``vmap``-ed over the classes; every class keeps its own minibatch stream;
* a fit with no solver call routed through :func:`solve` simply runs the K binary fits one
  after the other.

PRNG keys: with ``key`` the estimator's key (from ``random_state``), class k's binary fit uses
``fold_in(key, k)`` wherever a binary fit uses ``key``; so ``estimators_[k]`` equals a binary fit of
"class k vs rest" whose key is ``fold_in(key, k)`` (tested), whichever way the calls were batched.

Predictions stack the K binary predictive moments as columns (n, K); the class probabilities
are the K one-vs-rest probit probabilities Phi(m_k / sqrt(1 + v_k)) normalised to sum to one.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import log_ndtr, logsumexp

from bayes_maxmargin.core.kernels import Kernel
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.core.predict import probit_margin
from bayes_maxmargin.engine.checkpoint import call_interruptibly
from bayes_maxmargin.engine.mcmc import ChainResult, run_chains
from bayes_maxmargin.engine.resumable import intercepted, run_resumable_batched, solver_call, stack_differing
from bayes_maxmargin.models.gp.svi import svi_gp
from bayes_maxmargin.models.linear.svi import svi_linear

__all__ = ["BatchRequest", "classes_together", "combine_attributes", "combine_draws", "fit_one_vs_rest",
           "normalised_probabilities", "register_batched", "solve"]


class BatchRequest(BaseException):
    """A solver call recorded during a one-vs-rest fit (a BaseException so that no ``except
    Exception`` of the fitting code can swallow it)."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, x64: bool) -> None:
        super().__init__(getattr(fn, "__name__", repr(fn)))
        self.fn, self.args, self.kwargs, self.x64 = fn, args, kwargs, x64


class _Recorder:
    """Replayed solver results of one sub-estimator, in call order, and how many classes are fitted."""

    def __init__(self, n_classes: int = 1) -> None:
        self.results: list[Any] = []
        self.calls = 0
        self.n_classes = n_classes


def classes_together(owner: Any) -> int:
    """How many binary problems run together with ``owner``'s fit: K during a one-vs-rest fit of K
    classes (their solver calls run as one batched program), else 1. Memory checks count every one."""
    rec = owner.__dict__.get("_ovr_recorder")
    return 1 if rec is None else rec.n_classes


#: Solvers that wait for their compiled chunks themselves, with the signal handling of their checkpoints,
#: in the calling thread; every other solver is one compiled program (or a loop of them), called
#: through :func:`~bayes_maxmargin.engine.checkpoint.call_interruptibly` so that Ctrl-C stops it at once.
_CHUNKED = (run_chains, svi_gp, svi_linear, solver_call)


def _call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs) if fn in _CHUNKED else call_interruptibly(fn, *args, **kwargs)


def solve(owner: Any, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or, inside a one-vs-rest fit of ``owner``, its batched result.

    ``kwargs`` are the static (non-array) arguments; they must agree across the classes for the
    calls to be batched (otherwise the calls run one by one)."""
    rec = owner.__dict__.get("_ovr_recorder")
    if rec is None:
        return _call(fn, *args, **kwargs)
    i = rec.calls
    rec.calls += 1
    if i < len(rec.results):
        return rec.results[i]
    raise BatchRequest(fn, args, kwargs, bool(jax.config.jax_enable_x64))


def fit_one_vs_rest(subs: Sequence[Any], fit_one: Callable[[int], Any]) -> None:
    """Run ``fit_one(k)`` (the binary fit of ``subs[k]``) for every k, batching their solver calls."""
    recs = [_Recorder(len(subs)) for _ in subs]
    for sub, rec in zip(subs, recs):
        sub._ovr_recorder = rec
    try:
        pending = list(range(len(subs)))
        while pending:
            requests = {}
            for k in pending:
                recs[k].calls = 0
                try:
                    with intercepted(functools.partial(solve, subs[k])):
                        fit_one(k)
                except BatchRequest as req:
                    requests[k] = req
            pending = list(requests)
            if pending:
                results = _dispatch([requests[k] for k in pending])
                for k, result in zip(pending, results):
                    recs[k].results.append(result)
    finally:
        for sub in subs:
            sub.__dict__.pop("_ovr_recorder", None)


# ------------------------------------------------------------------------------ batched execution
_BATCHED: dict[Callable, Callable] = {}


def register_batched(fn: Callable, batched: Callable) -> None:
    """Execute recorded calls of ``fn`` with ``batched(fn, args_per_class, kwargs) -> results``
    instead of the default ``vmap``."""
    _BATCHED[fn] = batched


def _equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, (np.ndarray, jax.Array)) or isinstance(b, (np.ndarray, jax.Array)):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different
        return False


def _tree_equal(a: Any, b: Any) -> bool:
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    return ta == tb and all(_equal(x, y) for x, y in zip(la, lb))


def _same_static(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(_tree_equal(a[k], b[k]) for k in a)


def _dispatch(requests: list[BatchRequest]) -> list[Any]:
    first = requests[0]
    batchable = len(requests) > 1 and all(
        r.fn is first.fn and r.x64 == first.x64 and _same_static(r.kwargs, first.kwargs) for r in requests
    )
    if batchable:
        with float_precision(first.x64):
            batched, args = _BATCHED.get(first.fn, _vmapped), (first.fn, [r.args for r in requests], first.kwargs)
            out = batched(*args) if first.fn in _CHUNKED else call_interruptibly(batched, *args)
        if out is not None:
            return out
    if first.fn is solver_call and len(requests) > 1:  # K runs cannot share one checkpoint folder
        raise ValueError(f"the one-vs-rest problems' runs of {first.args[0].__name__} differ in their options: "
                         "they cannot run together with one checkpoint")
    results = []
    for r in requests:  # different calls per class: one by one
        with float_precision(r.x64):
            results.append(_call(r.fn, *r.args, **r.kwargs))
    return results


class _Split:
    """Leaves of K argument pytrees, split into those shared by every class and those that differ
    (stacked along a new leading class axis)."""

    def __init__(self, per_class: Sequence[Any]) -> None:
        try:
            merged, (self.treedef, self.mask) = stack_differing(per_class)
        except ValueError:
            raise _Unbatchable from None
        leaves = self.treedef.flatten_up_to(merged)
        self.shared = [lv for lv, m in zip(leaves, self.mask) if not m]
        self.batched = [jnp.asarray(lv) for lv, m in zip(leaves, self.mask) if m]

    def merge(self, shared: Sequence[Any], batched: Sequence[Any]) -> Any:
        s, b = iter(shared), iter(batched)
        return jax.tree_util.tree_unflatten(self.treedef, [next(b) if m else next(s) for m in self.mask])


class _Unbatchable(Exception):
    pass


def _unstack(tree: Any, K: int) -> list[Any]:
    return [jax.tree_util.tree_map(lambda a, k=k: a[k], tree) for k in range(K)]


def _vmapped(fn: Callable, per_class: list[tuple], kwargs: dict) -> list[Any] | None:
    """One ``vmap`` of ``fn`` over the class axis of the arguments that differ between classes."""
    try:
        split = _Split(per_class)
    except _Unbatchable:
        return None

    def call(*batched):
        return fn(*split.merge(split.shared, batched), **kwargs)

    return _unstack(jax.vmap(call)(*split.batched), len(per_class))


# ------------------------------------------------------------------------------ stacked chains
@functools.cache
def _class_state_type(fields: tuple[str, ...], n_extra: int) -> type:
    return collections.namedtuple("OneVsRestState", fields + tuple(f"class_data_{i}" for i in range(n_extra)))


@dataclasses.dataclass(frozen=True)
class _ClassKernel:
    """A binary Gibbs kernel on a state that also carries its problem's per-class data leaves."""

    kernel: Callable
    inner_record: Callable
    inner_type: type
    state_type: type
    treedef: Any
    mask: tuple[bool, ...]

    def _split(self, state):
        n = len(self.inner_type._fields)
        return self.inner_type(*state[:n]), state[n:]

    def _merge(self, extra, shared):
        e, s = iter(extra), iter(shared)
        return jax.tree_util.tree_unflatten(self.treedef, [next(e) if m else next(s) for m in self.mask])

    def __call__(self, key, state, shared, _unused):
        inner, extra = self._split(state)
        data, hyper = self._merge(extra, shared)
        new, info = self.kernel(key, inner, data, hyper)
        return self.state_type(*new, *extra), info

    @property
    def record(self) -> "_ClassRecord":
        return _ClassRecord(self.inner_record, self.inner_type)


@dataclasses.dataclass(frozen=True)
class _ClassRecord:
    """The binary record function on the stacked state (a hashable value, so that the driver's
    compiled chunk is reused by the next fit of the same shapes)."""

    inner_record: Callable
    inner_type: type

    def __call__(self, state):
        return self.inner_record(self.inner_type(*state[: len(self.inner_type._fields)]))


def _run_chains_batched(fn: Callable, per_class: list[tuple], kwargs: dict) -> list[ChainResult] | None:
    """K binary :func:`run_chains` calls as one run of K * num_chains chains."""
    kernel, record = per_class[0][0], per_class[0][1]
    if any(a[0] != kernel or a[1] != record or len(a) != 6 for a in per_class):
        return None
    try:
        split = _Split([(a[4], a[5]) for a in per_class])
    except _Unbatchable:
        return None
    K = len(per_class)
    states = [a[2] for a in per_class]
    inner_type = type(states[0])
    C = jax.tree_util.tree_leaves(states[0])[0].shape[0]
    # each field's arrays (a field may be a tuple of them) stacked along the chains; None (an unused part
    # of the state) stays None
    flat = [jax.tree_util.tree_map(lambda *xs: jnp.concatenate([jnp.asarray(x) for x in xs]),
                                   *(getattr(s, f) for s in states)) for f in inner_type._fields]
    extra = [jnp.repeat(b, C, axis=0) for b in split.batched]
    state_type = _class_state_type(inner_type._fields, len(extra))
    wrapped = _ClassKernel(kernel, record, inner_type, state_type, split.treedef, split.mask)
    keys = jnp.stack([jnp.asarray(a[3]) for a in per_class])
    chain_keys = jax.vmap(lambda k: jax.vmap(functools.partial(jax.random.fold_in, k))(jnp.arange(C)))(keys)
    res = fn(wrapped, wrapped.record, state_type(*flat, *extra), keys[0], tuple(split.shared), None,
             chain_keys=chain_keys.reshape((K * C,) + chain_keys.shape[2:]), **kwargs)
    out = []
    for k in range(K):
        rows = slice(k * C, (k + 1) * C)
        samples = {name: v[rows] for name, v in res.samples.items()}
        info = {name: v[rows] for name, v in res.info.items()}
        final = inner_type(*(jax.tree_util.tree_map(lambda v: v[rows], getattr(res.final_state, f))
                             for f in inner_type._fields))
        out.append(ChainResult(samples, final, res.num_iterations, info))
    return out


register_batched(run_chains, _run_chains_batched)


# ------------------------------------------------------------------------------ stacked labels (SVI)
def _svi_batched(fn: Callable, per_class: list[tuple], kwargs: dict) -> list[Any] | None:
    """K binary SVI runs ``fn(X, y, *rest)`` as one run with labels of shape (K, N): the inputs
    are shared, the labels and every other argument that differs between the classes (inducing
    points, seeds) are stacked on the host along a leading class axis."""
    X = per_class[0][0]
    if any(len(a) != len(per_class[0]) or not _equal(a[0], X) for a in per_class[1:]):
        return None
    rest = []
    for values in list(zip(*per_class))[2:]:
        same = all(_tree_equal(v, values[0]) for v in values[1:])
        rest.append(values[0] if same else np.stack([np.asarray(v) for v in values]))
    return fn(X, np.stack([np.asarray(a[1]) for a in per_class]), *rest, **kwargs)


register_batched(svi_gp, _svi_batched)
register_batched(svi_linear, _svi_batched)


# ------------------------------------------------------------------------------ checkpointed solvers
def _resumable_batched(fn: Callable, per_class: list[tuple], options: dict) -> list[Any] | None:
    """K checkpointed runs of one solver (:func:`~bayes_maxmargin.engine.resumable.solver_call`) as one run
    with one checkpoint (:func:`~bayes_maxmargin.engine.resumable.run_resumable_batched`)."""
    solver = per_class[0][0]
    if any(a[0] is not solver for a in per_class):
        return None
    return run_resumable_batched(solver, [(a[1], a[2]) for a in per_class], **options)


register_batched(solver_call, _resumable_batched)


# ------------------------------------------------------------------------------ results
def normalised_probabilities(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Phi(m_k / sqrt(1 + v_k)) normalised over the class axis (last), computed in log space so
    that rows whose K probabilities all underflow stay finite."""
    log_p = log_ndtr(probit_margin(mean, var))
    return np.exp(log_p - logsumexp(log_p, axis=-1, keepdims=True))


#: Attributes that are not stacked from the sub-estimators.
_NOT_STACKED = frozenset({"classes_", "n_features_in_", "feature_names_in_", "idata_", "estimators_"})


def combine_attributes(subs: Sequence[Any]) -> dict[str, Any]:
    """The public fitted attributes of the K binary fits with a leading class axis: ``coef_``
    (1, d) each -> (K, d) and ``intercept_`` -> (K,) as in scikit-learn; scalars -> (K,); arrays
    of one shape -> (K, ...); one string or kernel object for all (``kernel_``) -> that one; anything
    else (e.g. arrays of different lengths) -> list of K."""
    out: dict[str, Any] = {}
    for name in vars(subs[0]):
        if not name.endswith("_") or name.startswith("_") or name in _NOT_STACKED:
            continue
        values = [getattr(s, name, None) for s in subs]
        if any(v is None for v in values):
            continue
        if name in ("coef_", "intercept_"):
            out[name] = np.concatenate([np.asarray(v) for v in values], axis=0)
        elif all(isinstance(v, (str, Kernel)) and v == values[0] for v in values):  # e.g. kernel_
            out[name] = values[0]
        elif all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in values):
            out[name] = np.asarray(values)
        elif all(isinstance(v, np.ndarray) for v in values) and len({v.shape for v in values}) == 1:
            out[name] = np.stack(values)
        else:
            out[name] = list(values)
    return out


def check_combined(owner: Any, subs: Sequence[Any]) -> None:
    """Raise ValueError where a one-vs-rest fit's stacked attributes are not :func:`combine_attributes` of
    its binary fits ``subs`` (a restored file whose ``estimators_`` were reordered, edited or taken from
    another fit): the same values, in the same order, exactly."""
    for name, value in combine_attributes(subs).items():
        mine = vars(owner).get(name)
        la, ta = jax.tree_util.tree_flatten(mine)
        lb, tb = jax.tree_util.tree_flatten(value)
        if ta != tb or not all(_equal_nan(x, y) for x, y in zip(la, lb)):
            raise ValueError(f"{name} is not that of the one-vs-rest estimators_ (stacked in their order)")


def _equal_nan(a: Any, b: Any) -> bool:
    """:func:`_equal`, NaN equal to NaN (traces padded with NaN)."""
    if isinstance(a, (np.ndarray, jax.Array, np.generic)) and isinstance(b, (np.ndarray, jax.Array, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        nan = a.dtype.kind in "fc" and b.dtype.kind in "fc"
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=nan))
    return _equal(a, b)


def combine_draws(parts: Sequence[Any], classes: np.ndarray) -> Any:
    """K binary DataTrees (the sub-fits' ``idata_``, or the draws their mixing checks read) as one with
    a ``class`` dimension (labels as strings); traces of different lengths are padded with NaN."""
    import xarray as xr

    labels = [str(c) for c in classes]
    groups = {}
    for name in parts[0].children:
        ds = xr.concat([p[name].to_dataset() for p in parts], dim="class", join="outer", combine_attrs="override")
        groups[name] = ds.assign_coords({"class": labels})
    combined = xr.DataTree.from_dict(groups)
    combined.attrs.update(parts[0].attrs)
    return combined
