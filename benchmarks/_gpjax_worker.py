"""GPJax's sparse variational GP classifier for ``benchmarks/vs_peers.py``, in its own interpreter.

GPJax 1.0.0 requires jax < 0.11 and this package jax >= 0.12, so the peer runs in a separate
environment::

    python3.12 -m venv venvgpjax
    venvgpjax/bin/pip install "gpjax==1.0.0" "jax<0.11" scikit-learn
    python benchmarks/vs_peers.py --gpjax-python venvgpjax/bin/python ...   # or BMM_GPJAX_PYTHON

``vs_peers.py`` starts this file once per run as a subprocess of that interpreter (:class:`Worker`),
with its own thread settings in the environment, and sends it requests on stdin; the answers come
back on stdout. The worker stays alive between requests, so JAX's compilation caches persist: a
second fit of the same shape reuses the compiled program. It imports numpy, and for the requests
that need them jax, gpjax, optax, equinox and scikit-learn's ``KMeans``; never ``bayes_maxmargin``.

Messages (:func:`encode`, :func:`write_message`): 8 bytes of little-endian length, then an ``.npz``
archive (no pickles) of the arrays and a JSON header ``__meta__`` holding the operation ``op`` and its
scalars. An answer with ``error`` in its header reports a request that raised (:class:`Worker`
raises it as a ``RuntimeError``). Operations (:data:`OPS`):

* ``hello``: the versions (python, jax, gpjax), ``XLA_FLAGS``, the BLAS / OpenMP environment and the
  loaded thread pools; an error when gpjax does not import.
* ``echo``: the request's header and arrays unchanged (a check of the pipe).
* ``clear_caches``: ``jax.clear_caches()``, before a first fit.
* ``fit``: arrays ``X``, ``y`` (-1 / +1), the configuration of :func:`init_family` and
  :func:`fit`; answers ``id`` (for ``predict``), ``fit_s`` (k-means and the fit, timed here),
  ``n_iter`` and ``warnings`` (category, message).
* ``predict``: ``id`` and ``X``; answers ``p``, P(y = +1) (:func:`proba`).
* ``susy``: ``X``, ``y``, ``X_test`` and ``records``: :func:`susy_curve`; answers ``steps`` and
  ``seconds`` per record and ``proba`` (records x test rows).
* ``exit``: ends the worker.

The configuration (``fit`` and ``susy``): ``lengthscale`` (every ARD length-scale's start),
``num_steps``, ``batch_size``, ``num_inducing``, ``learning_rate``, ``random_state``.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

OPS = ("hello", "echo", "clear_caches", "fit", "predict", "susy", "exit")
META = "__meta__"
#: fitted models kept for ``predict`` (the oldest is dropped first)
KEPT_MODELS = 8
_HEADER = struct.Struct("<Q")


# ---------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------


def encode(meta: dict[str, Any], arrays: dict[str, Any] | None = None) -> bytes:
    """One message: an ``.npz`` archive of ``arrays`` and the JSON of ``meta`` (as bytes, ``__meta__``)."""
    arrays = {k: np.asarray(v) for k, v in (arrays or {}).items()}
    for k, v in arrays.items():
        if k == META or v.dtype.hasobject:
            raise ValueError(f"array {k!r} of a GPJax worker message: the name {META!r} and object arrays "
                             "are not allowed")
    buf = io.BytesIO()
    np.savez(buf, **{META: np.frombuffer(json.dumps(meta).encode(), np.uint8)}, **arrays)
    return buf.getvalue()


def decode(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays of a message of :func:`encode`."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        arrays = {k: archive[k] for k in archive.files}
    if META not in arrays:
        raise ValueError(f"a GPJax worker message without its {META!r} member")
    return json.loads(arrays.pop(META).tobytes()), arrays


def write_message(stream: BinaryIO, data: bytes) -> None:
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_message(stream: BinaryIO) -> bytes:
    """The next message of ``stream``; ``EOFError`` when it ends before a whole message."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the stream ended")
    (size,) = _HEADER.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError(f"the stream ended after {len(data)} of {size} bytes")
    return data


# ---------------------------------------------------------------------------
# the client (vs_peers.py's side)
# ---------------------------------------------------------------------------


class Worker:
    """This file run as a subprocess of ``python`` with the environment ``env``; :meth:`request`
    sends one request and returns the answer's header and arrays. Its stderr is the caller's."""

    def __init__(self, python: str, env: dict[str, str] | None = None) -> None:
        import subprocess

        self.python = python
        self.proc = subprocess.Popen([python, str(Path(__file__).resolve())], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)

    def request(self, meta: dict[str, Any], **arrays: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        try:
            write_message(self.proc.stdin, encode(meta, arrays))
            reply, out = decode(read_message(self.proc.stdout))
        except (BrokenPipeError, EOFError) as exc:
            raise RuntimeError(f"the GPJax worker of {self.python} ended (exit code {self.proc.wait()}) during "
                               f"{meta.get('op')!r}; its messages are above on stderr") from exc
        if "error" in reply:
            raise RuntimeError(f"GPJax worker ({self.python}), {meta.get('op')!r}: {reply['error']}")
        return reply, out

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                write_message(self.proc.stdin, encode({"op": "exit"}))
                self.proc.wait(timeout=30)
            except (BrokenPipeError, OSError, ValueError):
                pass
            except Exception:  # noqa: BLE001 -- e.g. a timeout: end it
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()


def start(python: str, env: dict[str, str] | None = None) -> tuple[Worker, dict[str, Any]]:
    """A :class:`Worker` on ``python`` and its ``hello``; ``RuntimeError`` (the worker closed) when
    ``python`` does not run or gpjax does not import there."""
    try:
        worker = Worker(python, env)
    except OSError as exc:
        raise RuntimeError(f"{python} does not run: {exc}") from exc
    try:
        info, _ = worker.request({"op": "hello"})
    except RuntimeError:
        worker.close()
        raise
    return worker, info


# ---------------------------------------------------------------------------
# the peer (the worker's side)
# ---------------------------------------------------------------------------


def negative_elbo(q, data):
    import gpjax as gpx

    return -gpx.objectives.elbo(q, data)


_CACHE: dict[Any, Any] = {}


def jitted_fit():
    """``gpx.fit`` compiled once per shape and configuration (kept here, so that refits reuse it)."""
    import equinox as eqx
    import gpjax as gpx

    if "fit" not in _CACHE:
        _CACHE["fit"] = eqx.filter_jit(gpx.fit)
    return _CACHE["fit"]


def adam(learning_rate: float):
    """One optax Adam per rate, so that the jitted fit sees the same (static) optimiser every time."""
    import optax

    return _CACHE.setdefault(("adam", learning_rate), optax.adam(learning_rate))


def init_family(X: np.ndarray, cfg: dict[str, Any]):
    """The whitened variational family: ARD RBF kernel (every length-scale at ``cfg["lengthscale"]``,
    variance 1), zero mean, Bernoulli likelihood (probit), ``num_inducing`` points by k-means."""
    import gpjax as gpx
    import jax.numpy as jnp
    from sklearn.cluster import KMeans

    n, d = X.shape
    kernel = gpx.kernels.RBF(lengthscale=jnp.full(d, float(cfg["lengthscale"])), variance=1.0)
    prior = gpx.gps.Prior(mean_function=gpx.mean_functions.Zero(), kernel=kernel)
    posterior = prior * gpx.likelihoods.Bernoulli()
    km = KMeans(min(int(cfg["num_inducing"]), n), n_init=1, random_state=int(cfg["random_state"])).fit(X)
    return gpx.variational_families.WhitenedVariationalGaussian(
        model=posterior, inducing_inputs=jnp.asarray(km.cluster_centers_))


def _dataset(X: np.ndarray, y: np.ndarray):
    import gpjax as gpx
    import jax.numpy as jnp

    return gpx.Dataset(X=jnp.asarray(X, jnp.float64), y=jnp.asarray((np.asarray(y) > 0).astype(np.float64)[:, None]))


def fit(X: np.ndarray, y: np.ndarray, cfg: dict[str, Any]) -> tuple[Any, float]:
    """The fitted family of ``gpx.fit`` (Adam, ``num_steps`` minibatches of ``batch_size``) and the
    seconds from k-means to the end of the fit."""
    import jax
    import jax.random as jr

    t0 = time.perf_counter()
    X = np.asarray(X, np.float64)
    q, loss = jitted_fit()(model=init_family(X, cfg), objective=negative_elbo, train_data=_dataset(X, y),
                           optim=adam(float(cfg["learning_rate"])), key=jr.key(int(cfg["random_state"])),
                           num_iters=int(cfg["num_steps"]), batch_size=int(cfg["batch_size"]), verbose=False)
    jax.block_until_ready(loss)
    return q, time.perf_counter() - t0


def proba(q, X: np.ndarray, chunk: int = 2000) -> np.ndarray:
    """P(y = 1) = Phi(m / sqrt(1 + v)) of the marginal predictive of ``q`` (the Bernoulli likelihood's
    ``predict``), in chunks of rows."""
    import jax.numpy as jnp
    from scipy.special import ndtr

    post = q.condition(None)
    out = []
    for s in range(0, X.shape[0], chunk):
        dist = post(jnp.asarray(X[s : s + chunk], jnp.float64), covariance="diagonal")
        m, v = np.asarray(dist.mean).ravel(), np.asarray(dist.variance).ravel()
        out.append(ndtr(m / np.sqrt(1.0 + v)))
    return np.concatenate(out)


def strong(tree):
    """``tree`` with every array leaf strongly typed, so that a jitted chunk fed its own output is
    not traced again (weakly typed leaves come back strongly typed)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda x: jnp.asarray(x, dtype=x.dtype) if eqx.is_array(x) else x, tree)


def chunk_length(steps: int, records: int) -> int:
    """The smallest divisor of ``steps`` that gives at most ``records`` chunks (equal chunks: one program)."""
    return next(k for k in range(max(1, -(-steps // records)), steps + 1) if steps % k == 0)


def susy_curve(X, y, X_test, cfg: dict[str, Any], records: int) -> tuple[list[int], list[float], np.ndarray]:
    """The classifier trained in about ``records`` equal chunks of Adam steps (state carried over, each
    chunk the step of ``gpx.fit``: a minibatch drawn with replacement, the gradient of the negative
    ELBO), with the caches cleared first: the steps and seconds (k-means and compilation included,
    scoring not) after every chunk, and P(y = +1) of ``X_test`` then."""
    import equinox as eqx
    import jax
    import jax.random as jr
    from gpjax.fit import get_batch

    steps, B = int(cfg["num_steps"]), int(cfg["batch_size"])
    optim = adam(float(cfg["learning_rate"]))
    per = chunk_length(steps, records)

    @eqx.filter_jit
    def chunk(q, opt_state, data, keys):
        def step(carry, key):
            q, opt_state = carry
            loss, grads = eqx.filter_value_and_grad(negative_elbo)(q, get_batch(data, B, key))
            updates, opt_state = optim.update(grads, opt_state, eqx.filter(q, eqx.is_array))
            return (eqx.apply_updates(q, updates), opt_state), loss

        (q, opt_state), losses = jax.lax.scan(step, (q, opt_state), keys)
        return q, opt_state, losses

    jax.clear_caches()
    done_at, seconds, probs, scoring = [], [], [], 0.0
    t0 = time.perf_counter()
    X = np.asarray(X, np.float64)
    q = strong(init_family(X, cfg))
    data = _dataset(X, y)
    opt_state = strong(optim.init(eqx.filter(q, eqx.is_array)))
    keys = jr.split(jr.key(int(cfg["random_state"])), steps)
    done = 0
    while done < steps:
        q, opt_state, losses = chunk(q, opt_state, data, keys[done : done + per])
        jax.block_until_ready(losses)
        done = min(steps, done + per)
        t_s = time.perf_counter()
        done_at.append(done)
        seconds.append(t_s - t0 - scoring)
        probs.append(proba(q, np.asarray(X_test, np.float64)))
        scoring += time.perf_counter() - t_s
    return done_at, seconds, np.stack(probs)


def hello() -> dict[str, Any]:
    import gpjax  # first: without gpjax, fail before importing jax
    import jax
    from threadpoolctl import threadpool_info

    return {"python": sys.version.split()[0], "executable": sys.executable, "jax": jax.__version__,
            "gpjax": gpjax.__version__, "xla_flags": os.environ.get("XLA_FLAGS", ""),
            **{v: os.environ.get(v, "") for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
            "thread_pools": sorted({f"{i['internal_api']}: {i['num_threads']}" for i in threadpool_info()})}


class Server:
    """The worker's state: the fitted models by id (the last :data:`KEPT_MODELS`)."""

    def __init__(self) -> None:
        self.models: OrderedDict[int, Any] = OrderedDict()
        self.next_id = 0

    def handle(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
        op = meta.get("op")
        if op not in OPS:
            raise ValueError(f"unknown op {op!r}; choose from {', '.join(OPS)}")
        if op == "hello":
            return hello(), {}
        if op == "echo":
            return meta, arrays
        if op == "clear_caches":
            import jax

            jax.clear_caches()
            return {}, {}
        if op == "fit":
            import warnings

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                q, seconds = fit(arrays["X"], arrays["y"], meta)
            self.next_id += 1
            self.models[self.next_id] = q
            while len(self.models) > KEPT_MODELS:
                self.models.popitem(last=False)
            kinds = sorted({(w.category.__name__, str(w.message)[:200]) for w in caught})
            return {"id": self.next_id, "fit_s": seconds, "n_iter": int(meta["num_steps"]),
                    "warnings": [list(k) for k in kinds]}, {}
        if op == "predict":
            if meta["id"] not in self.models:
                raise KeyError(f"no fitted model {meta['id']} (the last {KEPT_MODELS} fits are kept)")
            return {}, {"p": proba(self.models[meta["id"]], np.asarray(arrays["X"], np.float64))}
        if op == "susy":
            steps, seconds, probs = susy_curve(arrays["X"], arrays["y"], arrays["X_test"], meta, int(meta["records"]))
            return {"steps": steps, "seconds": seconds}, {"proba": probs}
        raise ValueError(f"op {op!r} is not a request of the server")  # exit: ends serve()


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    """Answer the requests of ``inp`` on ``out`` until ``exit`` or the end of ``inp``."""
    import traceback

    server = Server()
    while True:
        try:
            meta, arrays = decode(read_message(inp))
        except EOFError:
            return
        if meta.get("op") == "exit":
            return
        try:
            reply, arrays = server.handle(meta, arrays)
        except Exception as exc:  # noqa: BLE001 -- reported to the caller, the worker goes on
            if meta.get("op") != "hello":
                traceback.print_exc()
            reply, arrays = {"error": f"{type(exc).__name__}: {exc}"}, {}
        write_message(out, encode(reply, arrays))


if __name__ == "__main__":
    os.environ["JAX_ENABLE_X64"] = "1"  # float64 throughout, read when jax is imported
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # what the libraries print goes to stderr, not into the answers
    serve(inp, out)
