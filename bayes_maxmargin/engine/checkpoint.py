"""Checkpoints of chunked runs (MCMC chains, SVI, the resumable loops of the compiled solvers): interrupt,
then resume the same run.

A checkpoint is a folder holding

``checkpoint.npz``
    The chains' states, the iterations done, the draws kept so far and the run's settings (the
    chains' PRNG keys and a hash of the data among them), written atomically after every chunk
    (read with ``allow_pickle=False``).
``idata.nc``
    The draws kept so far as ArviZ's DataTree (netCDF), written when the run stops early (Ctrl-C,
    SIGTERM, an exception) and when it completes.
``checkpoint.lock``, ``checkpoint.owner``
    The lock a run holds on the folder from start to end (:func:`checkpoint_session`) and the
    process id of its holder: a second run on the same folder, in another thread or process, stops
    at once with a :class:`CheckpointError` naming that process. The operating system releases the
    lock of a process that dies, so a killed run never blocks the next one.

While a checkpointed run is active in the main thread, SIGINT (Ctrl-C) and SIGTERM are acted upon
between compiled chunks, shortened to about a second when slow (:mod:`bayes_maxmargin.engine.chunks`): the run
writes its checkpoint and its draws, then raises ``KeyboardInterrupt`` (SIGINT) or
:class:`Terminated` (SIGTERM, a ``SystemExit`` with status 143 = 128 + 15, so that an uncaught one
ends the process with the status of a process killed by SIGTERM); the message says from which
iteration (SVI: step) ``resume=folder`` continues. The run waits for each chunk in Python
(:meth:`StopRequest.wait`; the chunk is called on a worker thread, :class:`Dispatch`, since a program
with host callbacks runs to its end inside the call), so a chunk still computing
:data:`STOP_GRACE_S` seconds after the signal (a long first chunk) is abandoned: the run stops at
once with the checkpoint of the last finished chunk, and a process that then exits does not wait
for XLA to finish the abandoned chunk (:func:`_end_without_waiting`). A second signal acts at once,
as without the run. A run without a checkpoint leaves the signal handlers alone; Ctrl-C then stops
it at once, its running chunk abandoned, and so it does any fit's single compiled solver (ECM, FITC,
VI, EM, VB, NUTS, VBEM) without a checkpoint, which the estimators call through :func:`call_interruptibly`
(with one, its loops run in chunks: :mod:`bayes_maxmargin.engine.resumable`).

Because iteration ``i`` of a chain draws from ``fold_in(chain_key, i)`` (see
:mod:`bayes_maxmargin.engine.mcmc`), a run resumed from a checkpoint gives exactly the draws
of an uninterrupted run with the same seed on the same device.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

__all__ = ["Checkpoint", "CheckpointError", "Dispatch", "StopRequest", "Terminated", "call_interruptibly",
           "checkpoint_folder", "checkpoint_session", "dispatch", "flat_state", "read_checkpoint", "restore_state",
           "resume_run", "wait_for", "write_checkpoint", "write_draws", "write_progress"]

FORMAT = "bayes_maxmargin.checkpoint"
#: Prefix of a kernel's Info among the recorded arrays of a run (:func:`~bayes_maxmargin.engine.mcmc.run_chains`).
INFO_PREFIX = "info:"
VERSION = 1
#: The files a run writes atomically into its folder (through temporary files ``.bmm-*.tmp``,
#: :func:`~bayes_maxmargin.core.io.atomic_path`; ``.{name}.*.tmp`` in earlier versions).
WRITTEN = ("checkpoint.npz", "idata.nc")
LOCK_FILE = "checkpoint.lock"
OWNER_FILE = "checkpoint.owner"


class CheckpointError(ValueError):
    """The checkpoint is unreadable or belongs to a different run."""


class Checkpoint(NamedTuple):
    """What a run needs to continue: settings (PRNG keys included), progress, state, kept arrays."""

    settings: dict[str, Any]
    done: int  # chunks' worth of progress: blocks of ``thin`` iterations (MCMC), rounds (SVI)
    state: dict[str, np.ndarray]  # :func:`flat_state` of the run's state pytree
    kept: dict[str, np.ndarray]  # draws (draw, chain, ...) as recorded, or the SVI traces
    extra: dict[str, Any] = {}  # JSON-able host state (the SVI minibatch stream)


def flat_state(tree: Any) -> dict[str, np.ndarray]:
    """The leaves of a state pytree by their path (``.nat.eta1``, ...), as NumPy arrays."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves}


def restore_state(template: Any, saved: dict[str, np.ndarray]) -> Any:
    """``template``'s pytree with the leaves of :func:`flat_state` ``saved``."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    return jax.tree_util.tree_unflatten(treedef, [jax.numpy.asarray(saved[jax.tree_util.keystr(p)]) for p, _ in leaves])


def fingerprint(data: Any, hyper: Any) -> str:
    """SHA-256 of the data and hyperparameter arrays a run was started with."""
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves((data, hyper)):
        arr = np.asarray(leaf)
        h.update(f"{arr.dtype}{arr.shape}".encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def write_checkpoint(folder: Path, ckpt: Checkpoint) -> None:
    """Write ``checkpoint.npz`` atomically (the previous one stays valid until the rename)."""
    from bayes_maxmargin.core.io import atomic_path

    arrays = {f"state/{k}": np.asarray(v) for k, v in ckpt.state.items()}
    arrays.update({f"kept/{k}": v for k, v in ckpt.kept.items()})
    meta = {"format": FORMAT, "version": VERSION, "done": int(ckpt.done), "settings": ckpt.settings,
            "extra": ckpt.extra}
    arrays["meta"] = np.asarray(json.dumps(meta))
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "checkpoint.npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, allow_pickle=False, **arrays)


def write_progress(
    folder: Path,
    settings: dict[str, Any],
    done: int,
    state: Any,
    kept: dict[str, np.ndarray],
    extra: dict[str, Any] | None = None,
) -> None:
    """Write the checkpoint of a run after a chunk (:func:`write_checkpoint` of its :class:`Checkpoint`).

    Parameters
    ----------
    folder : Path
        The checkpoint folder.
    settings : dict
        The run's settings.
    done : int
        Progress so far.
    state : pytree
        The run's state, stored as its :func:`flat_state`.
    kept : dict of str to numpy.ndarray
        Draws or traces kept so far.
    extra : dict, optional
        JSON-able host state (none by default).
    """
    ckpt = Checkpoint(settings, done, flat_state(state), kept)
    write_checkpoint(folder, ckpt if extra is None else ckpt._replace(extra=extra))


def read_checkpoint(folder: Path) -> Checkpoint:
    """Read the checkpoint in ``folder``; :class:`CheckpointError` if it is missing or unreadable."""
    path = Path(folder) / "checkpoint.npz"
    if not path.is_file():
        raise CheckpointError(f"no checkpoint to resume from: {str(path)!r} does not exist")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
        raise CheckpointError(f"{str(path)!r} is not a readable checkpoint ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise CheckpointError(f"{str(path)!r} is not a bayes_maxmargin checkpoint of version {VERSION}")
    return Checkpoint(
        meta["settings"], int(meta["done"]),
        {k[6:]: v for k, v in arrays.items() if k.startswith("state/")},
        {k[5:]: v for k, v in arrays.items() if k.startswith("kept/")},
        meta.get("extra", {}),
    )


def check_resumable(ckpt: Checkpoint, settings: dict[str, Any], init_state: Any, folder: Path) -> None:
    """Refuse a checkpoint written by another run: other settings, data, state layout or chains."""
    for key, value in settings.items():
        if ckpt.settings.get(key) != value:
            what = "the data or hyperparameters differ" if key == "fingerprint" else (
                f"{key} = {ckpt.settings.get(key)!r} there, {value!r} now")
            raise CheckpointError(f"the checkpoint in {str(folder)!r} belongs to a different run: {what}")
    for field, leaf in flat_state(init_state).items():
        saved = ckpt.state.get(field)
        if saved is None or saved.shape != leaf.shape or saved.dtype != leaf.dtype:
            raise CheckpointError(
                f"the checkpoint in {str(folder)!r} belongs to a different run: state field {field!r} is "
                f"{None if saved is None else (saved.shape, str(saved.dtype))}, expected {(leaf.shape, str(leaf.dtype))}")


def checkpoint_folder(checkpoint: Any, resume: Any) -> Path | None:
    """Where a run writes its checkpoints: ``checkpoint``, else the ``resume`` folder it continues."""
    chosen = checkpoint if checkpoint is not None else resume
    return None if chosen is None else Path(chosen)


def resume_run(resume: Any, settings: dict[str, Any], template: Any) -> tuple[Checkpoint, Any]:
    """The checkpoint in ``resume``, checked to belong to this run, and its state as ``template``'s
    pytree; :class:`CheckpointError` otherwise."""
    ckpt = read_checkpoint(Path(resume))
    check_resumable(ckpt, settings, template, Path(resume))
    return ckpt, restore_state(template, ckpt.state)


def write_draws(folder: Path, kept: dict[str, np.ndarray], iterations: int, complete: bool) -> None:
    """The draws kept so far, (draw, chain, ...) per name, as ``idata.nc`` (atomically)."""
    import arviz as az

    from bayes_maxmargin.core.io import NETCDF_ENGINE, atomic_path

    if not kept or not next(iter(kept.values())).shape[0]:
        return
    draws = {k: np.swapaxes(v, 0, 1) for k, v in kept.items()}
    posterior = {k: v for k, v in draws.items() if not k.startswith(INFO_PREFIX)}
    stats = {k[len(INFO_PREFIX):]: v for k, v in draws.items() if k.startswith(INFO_PREFIX)}
    groups = {"posterior": posterior, "sample_stats": stats}
    idata = az.from_dict({name: values for name, values in groups.items() if values})
    for node in idata.subtree:
        node.attrs.update({"iterations_done": int(iterations), "complete": int(complete)})
    with atomic_path(Path(folder) / "idata.nc") as tmp:
        idata.to_netcdf(str(tmp), engine=NETCDF_ENGINE)


#: Seconds a chunk running when a signal came may take to finish before the run stops without it
#: (chunks after a run's first one take about a second, :mod:`bayes_maxmargin.engine.chunks`).
STOP_GRACE_S = 2.0
#: Longest pause between two looks at a running chunk's outputs while signals are deferred.
POLL_S = 0.05
#: Each pause of :func:`wait_for` is at most this fraction of the time waited so far, so that a result is
#: seen at most that fraction late (doubling pauses saw it up to half late: 30-60 ms on a fit of 0.1 s).
POLL_FRACTION = 0.05


def _resume_note(folder: Path | None, resume_at: int | None, unit: str) -> str:
    """Where a stopped run can be continued from, for the messages of its exceptions."""
    if resume_at is None:
        return f"no checkpoint of this run exists yet in {str(folder)!r} (no chunk finished): start the fit again"
    return (f"the checkpoint in {str(folder)!r} holds the run up to {unit} {resume_at}: resume={str(folder)!r} "
            "continues from there")


class Terminated(SystemExit):
    """A checkpointed run stopped on SIGTERM after writing its checkpoint and its draws.

    A ``SystemExit`` with code 128 + the signal number (143 for SIGTERM): uncaught, the process ends
    with the status a shell, ``timeout`` or a batch scheduler expects of a process terminated by
    SIGTERM, without a traceback; caught (``except Terminated``), the checkpoint in ``folder`` is
    complete up to ``resume_at`` and ``resume=folder`` continues the run from there.

    Attributes
    ----------
    signum : int
        The signal received.
    folder : Path
        The checkpoint folder.
    resume_at : int or None
        The iteration (SVI: step) the checkpoint holds the run up to; None when no chunk of the
        run finished (no checkpoint of it exists).
    unit : str
        What ``resume_at`` counts ("iteration", "step").
    """

    def __init__(self, signum: int, folder: Path, resume_at: int | None = None, unit: str = "iteration"):
        super().__init__(128 + int(signum))
        self.signum, self.folder, self.resume_at, self.unit = int(signum), Path(folder), resume_at, unit

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}; {_resume_note(self.folder, self.resume_at, self.unit)}"


class StopRequest:
    """The first SIGINT / SIGTERM received during a checkpointed run, acted upon between chunks or,
    when the running chunk does not finish within :data:`STOP_GRACE_S` of the signal, at once.

    Attributes
    ----------
    folder : Path or None
        The checkpoint folder.
    signum : int or None
        The signal received, None before one came.
    received : float
        When it came (``time.monotonic()``).
    deferring : bool
        Whether the signals are deferred to this request (a checkpointed run in the main thread).
    resume_at : int or None
        What the checkpoint holds when the run stops now (kept up to date by the run after every
        chunk), None before one finished.
    unit : str
        What ``resume_at`` counts ("iteration", "step").
    """

    def __init__(self, folder: Path | None = None, unit: str = "iteration"):
        self.folder, self.signum, self.received, self.deferring = folder, None, 0.0, False
        self.resume_at: int | None = None
        self.unit = unit

    def error(self) -> BaseException:
        """``KeyboardInterrupt`` (SIGINT) or :class:`Terminated` (SIGTERM) for the signal received."""
        if self.signum == signal.SIGINT:
            return KeyboardInterrupt(f"stopped by SIGINT; {_resume_note(self.folder, self.resume_at, self.unit)}")
        return Terminated(self.signum, self.folder, self.resume_at, self.unit)

    def raise_if_requested(self) -> None:
        """Raise :meth:`error` if a signal came."""
        if self.signum is not None:
            raise self.error()

    def wait(self, outputs: Any) -> Any:
        """``outputs`` (a pytree of the arrays a compiled chunk was dispatched to compute, or the
        :class:`Dispatch` of the call that computes them) once they are ready.

        The wait polls them in Python (pauses of up to :data:`POLL_S`), so that a signal's handler
        runs as soon as the signal comes. While signals are deferred, if the chunk has not finished
        :data:`STOP_GRACE_S` after the signal, the run stops at once (:meth:`error`) and the
        chunk is abandoned: the checkpoint keeps the run up to the last finished chunk, and a
        process that ends while the chunk still computes ends without waiting for it
        (:func:`_end_without_waiting`). Otherwise a ``KeyboardInterrupt`` (Ctrl-C without a
        checkpoint, or a second Ctrl-C) abandons the chunk the same way.
        """
        return wait_for(outputs, self if self.deferring else None)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, a compiled chunk, called through :func:`dispatch` and waited for
        (:meth:`wait`)."""
        return self.wait(dispatch(fn, *args, **kwargs))


def _jax_settings() -> tuple[Any, ...]:
    """The calling thread's JAX settings that a fit sets for itself (thread-local in JAX)."""
    return jax.config.jax_enable_x64, jax.config.jax_default_matmul_precision, jax.config.jax_default_device


class Dispatch:
    """A call ``fn(*args, **kwargs)`` that traces, compiles and dispatches compiled programs, made on a
    worker thread so that the calling thread can wait for it in Python (:func:`wait_for`) and act on a
    signal meanwhile: a program whose loops carry host callbacks (the progress reports) runs to its end
    inside the call that dispatches it, and the compilation of any program inside its first call. The
    call sees the calling thread's JAX settings (precision, default device).
    """

    def __init__(self, fn: Any, args: tuple, kwargs: dict) -> None:
        self._outputs: Any = None
        self._error: BaseException | None = None
        x64, precision, device = _jax_settings()

        def call() -> None:
            try:
                with jax.enable_x64(x64), jax.default_matmul_precision(precision), jax.default_device(device):
                    self._outputs = fn(*args, **kwargs)
            except BaseException as err:  # noqa: BLE001 - raised again in the calling thread by result()
                self._error = err

        self._thread = threading.Thread(target=call, name=f"bayes_maxmargin:{getattr(fn, '__name__', 'call')}",
                                        daemon=True)
        self._thread.start()

    def returned(self) -> bool:
        """Whether the call returned (its outputs may still compute)."""
        return not self._thread.is_alive()

    def is_ready(self) -> bool:
        """Whether the call returned and its outputs are computed."""
        return self.returned() and all(leaf.is_ready() for leaf in _array_leaves(self._outputs))

    def result(self) -> Any:
        """The call's outputs (waiting for it to return), or its exception raised again."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._outputs


def _array_leaves(outputs: Any) -> list[Any]:
    return [leaf for leaf in jax.tree_util.tree_leaves(outputs) if hasattr(leaf, "is_ready")]


def dispatch(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A :class:`Dispatch` of ``fn(*args, **kwargs)`` when called from the main thread (where signals
    are handled), else the call's outputs."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)
    return Dispatch(fn, args, kwargs)


def wait_for(outputs: Any, request: StopRequest | None = None) -> Any:
    """``outputs`` (arrays being computed, or a :class:`Dispatch`; its outputs then) once ready,
    waited for by polling in Python (pauses of :data:`POLL_FRACTION` of the time waited, at most
    :data:`POLL_S`): a ``KeyboardInterrupt`` raised meanwhile (Ctrl-C) abandons the
    computation (:func:`_end_without_waiting`) and propagates at once; with a ``request`` whose
    signal came :data:`STOP_GRACE_S` ago, the computation is abandoned and ``request.error()`` raised."""
    waiting = outputs if isinstance(outputs, Dispatch) else None
    pending = [waiting] if waiting is not None else _array_leaves(outputs)
    start = time.monotonic()
    try:
        while pending:
            if waiting is not None and waiting.returned():  # then its outputs, as arrays
                outputs, waiting = waiting.result(), None
                pending = _array_leaves(outputs)
            pending = [leaf for leaf in pending if not leaf.is_ready()]
            if not pending:
                break
            if request is not None and request.signum is not None and (
                    time.monotonic() - request.received >= STOP_GRACE_S):
                break
            time.sleep(min(max(1e-4, POLL_FRACTION * (time.monotonic() - start)), POLL_S))
    except KeyboardInterrupt:
        _abandon(pending, signal.SIGINT)
        raise
    if pending:  # the grace time after the request's signal passed
        _abandon(pending, request.signum)
        raise request.error()
    return waiting.result() if waiting is not None else outputs


def call_interruptibly(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` (a fit's compiled solver) through :func:`dispatch` and :func:`wait_for`:
    Ctrl-C stops the wait at once with ``KeyboardInterrupt``, whether the program runs on or is still
    compiling, instead of when it ends (the solvers of ECM, FITC, VI, EM, VB and NUTS are one program
    each, minutes long on large data)."""
    return wait_for(dispatch(fn, *args, **kwargs))


#: The outputs of chunks abandoned on a signal, and that signal (:func:`_end_without_waiting`).
_ABANDONED: dict[str, Any] = {"leaves": [], "signum": None}


def _abandon(leaves: list[Any], signum: int) -> None:
    """Record the outputs of a chunk left running by a stop on ``signum``."""
    if not _ABANDONED["leaves"]:
        atexit.register(_end_without_waiting)
    _ABANDONED["leaves"].extend(leaves)
    _ABANDONED["signum"] = int(signum)


def _end_without_waiting() -> None:
    """At the interpreter's exit, if a chunk abandoned on a signal still computes: flush the
    standard streams and the logging handlers and end the process at once, with the status of that
    signal's stop (143 for SIGTERM, killed by SIGINT for Ctrl-C), instead of letting the shutdown
    wait for XLA to finish the chunk (minutes for a long chunk). The exit handlers registered before
    the stop (JAX's own clean-up among them) do not run.

    This is the status of an uncaught stop; a program that caught it and ends (with another status)
    before the abandoned chunk finished ends with this one too.
    """
    if all(leaf.is_ready() for leaf in _ABANDONED["leaves"]):
        return
    logging = sys.modules.get("logging")
    if logging is not None:
        with contextlib.suppress(Exception):
            logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signum = _ABANDONED["signum"]
    if signum == signal.SIGINT:  # as Python ends on an uncaught KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(128 + signum)


@contextlib.contextmanager
def _signals_between_chunks(request: StopRequest) -> Iterator[None]:
    """While active (main thread only), the first SIGINT or SIGTERM is recorded in ``request``
    instead of acting; a second one gets the handler there was before (Ctrl-C twice interrupts at
    once, SIGTERM twice kills). Ignored signals stay ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum, frame):
        if request.signum is None:
            request.signum, request.received = signum, time.monotonic()
            return
        signal.signal(signum, previous[signum])
        signal.raise_signal(signum)

    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            current = signal.getsignal(signum)
            if current is not None and current != signal.SIG_IGN:  # None: a handler not set from Python
                previous[signum] = signal.signal(signum, handler)
        request.deferring = bool(previous)
        yield
    finally:
        request.deferring = False
        for signum, old in previous.items():
            signal.signal(signum, old)


def _remove_stale_temporaries(folder: Path) -> None:
    """Remove the temporary files of interrupted writes: those of processes that no longer run
    (:func:`~bayes_maxmargin.core.io.remove_stale_temporaries`), and, the folder being locked so that no
    other run writes its files, those of the run's files named as earlier versions named them
    (``.checkpoint.npz.*.tmp``, ...)."""
    from bayes_maxmargin.core.io import remove_stale_temporaries

    remove_stale_temporaries(folder)
    for name in WRITTEN:
        for tmp in folder.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)


#: Longest wait for the process id of a folder's lock holder, which it writes just after taking the lock.
OWNER_WAIT_S = 0.5


def _lock_owner(folder: Path) -> int | None:
    """The process id in the folder's owner file, waiting up to :data:`OWNER_WAIT_S` for a holder that
    has just taken the lock to write it; None if it does not come."""
    deadline = time.monotonic() + OWNER_WAIT_S
    while True:
        try:
            return int((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of a checkpoint folder; :class:`CheckpointError` naming the holder if another
    run (thread or process) has it."""
    from filelock import FileLock, Timeout

    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / LOCK_FILE, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        owner = _lock_owner(folder)
        raise CheckpointError(f"the checkpoint folder {str(folder)!r} is in use by another fit"
                              f"{'' if owner is None else f' (process {owner})'}") from None
    try:
        (folder / OWNER_FILE).write_text(str(os.getpid()))
        yield
    finally:
        (folder / OWNER_FILE).unlink(missing_ok=True)
        lock.release()


@contextlib.contextmanager
def checkpoint_session(folder: Path | None, unit: str = "iteration") -> Iterator[StopRequest]:
    """What a checkpointed run holds from start to end: the folder's lock (after which stale
    temporary files are removed) and SIGINT / SIGTERM deferred to the :class:`StopRequest` it
    yields, through which the run waits for its chunks (:meth:`StopRequest.wait`) and which it
    checks between them. Without a folder: nothing, a request that never fires, and the signal
    handlers left as they are.

    Parameters
    ----------
    folder : Path or None
        The checkpoint folder.
    unit : str, default "iteration"
        What the run's progress counts, for the messages of a stop ("iteration", "step").

    Raises
    ------
    CheckpointError
        Another run holds the folder.
    """
    request = StopRequest(folder, unit)
    if folder is None:
        yield request
        return
    with _folder_lock(folder), _signals_between_chunks(request):
        _remove_stale_temporaries(folder)
        yield request
