"""Checkpoints of chunked runs (MCMC chains, SVI): interrupt, then resume the same run.

A checkpoint is a folder holding

``checkpoint.npz``
    The chains' states, the iterations done, the draws kept so far and the run's settings (the
    chains' PRNG keys and a hash of the data among them), written atomically after every chunk
    (read with ``allow_pickle=False``).
``idata.nc``
    The draws kept so far as ArviZ InferenceData, written when the run stops early (Ctrl-C,
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
ends the process with the status of a process killed by SIGTERM). A second signal acts at once, as
without the run. A run without a checkpoint leaves the signal handlers alone.

Because iteration ``i`` of a chain draws from ``fold_in(chain_key, i)`` (see
:mod:`bayes_maxmargin.engine.mcmc`), a run resumed from a checkpoint gives exactly the draws
of an uninterrupted run with the same seed on the same device.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

__all__ = ["Checkpoint", "CheckpointError", "StopRequest", "Terminated", "checkpoint_folder", "checkpoint_session",
           "flat_state", "read_checkpoint", "restore_state", "resume_run", "write_checkpoint", "write_draws",
           "write_progress"]

FORMAT = "bayes_maxmargin.checkpoint"
#: Prefix of a kernel's Info among the recorded arrays of a run (:func:`~bayes_maxmargin.engine.mcmc.run_chains`).
INFO_PREFIX = "info:"
VERSION = 1
#: The files a run writes atomically into its folder (their temporary files are ``.{name}.*.tmp``).
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

    from bayes_maxmargin.core.io import atomic_path

    if not kept or not next(iter(kept.values())).shape[0]:
        return
    draws = {k: np.swapaxes(v, 0, 1) for k, v in kept.items()}
    posterior = {k: v for k, v in draws.items() if not k.startswith(INFO_PREFIX)}
    stats = {k[len(INFO_PREFIX):]: v for k, v in draws.items() if k.startswith(INFO_PREFIX)}
    idata = az.from_dict(posterior=posterior, sample_stats=stats or None,
                         attrs={"iterations_done": int(iterations), "complete": int(complete)})
    with atomic_path(Path(folder) / "idata.nc") as tmp:
        idata.to_netcdf(str(tmp))


class Terminated(SystemExit):
    """A checkpointed run stopped on SIGTERM after writing its checkpoint and its draws.

    A ``SystemExit`` with code 128 + the signal number (143 for SIGTERM): uncaught, the process ends
    with the status a shell, ``timeout`` or a batch scheduler expects of a process terminated by
    SIGTERM, without a traceback; caught (``except Terminated``), the checkpoint in ``folder`` is
    complete up to the last chunk and ``resume=folder`` continues the run.

    Attributes
    ----------
    signum : int
        The signal received.
    folder : Path
        The checkpoint folder.
    """

    def __init__(self, signum: int, folder: Path):
        super().__init__(128 + int(signum))
        self.signum, self.folder = int(signum), Path(folder)

    def __str__(self) -> str:
        return (f"stopped by {signal.Signals(self.signum).name}; the checkpoint in {str(self.folder)!r} "
                "holds the run up to its last chunk (resume from it)")


class StopRequest:
    """The first SIGINT / SIGTERM received during a checkpointed run, acted upon between chunks."""

    def __init__(self, folder: Path | None = None):
        self.folder, self.signum = folder, None

    def raise_if_requested(self) -> None:
        """Raise ``KeyboardInterrupt`` (SIGINT) or :class:`Terminated` (SIGTERM) if a signal came."""
        if self.signum is None:
            return
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt(f"stopped by SIGINT; the checkpoint in {str(self.folder)!r} holds the run up "
                                    "to its last chunk (resume from it)")
        raise Terminated(self.signum, self.folder)


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
            request.signum = signum
            return
        signal.signal(signum, previous[signum])
        signal.raise_signal(signum)

    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            current = signal.getsignal(signum)
            if current is not None and current != signal.SIG_IGN:  # None: a handler not set from Python
                previous[signum] = signal.signal(signum, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _remove_stale_temporaries(folder: Path) -> None:
    """Remove the temporary files of interrupted writes (``.checkpoint.npz.*.tmp``, ...): with the
    folder locked, no other writer is at work there."""
    for name in WRITTEN:
        for tmp in folder.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)


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
        try:
            owner = f" (process {int((folder / OWNER_FILE).read_text())})"
        except (OSError, ValueError):
            owner = ""
        raise CheckpointError(f"the checkpoint folder {str(folder)!r} is in use by another fit{owner}") from None
    try:
        (folder / OWNER_FILE).write_text(str(os.getpid()))
        yield
    finally:
        (folder / OWNER_FILE).unlink(missing_ok=True)
        lock.release()


@contextlib.contextmanager
def checkpoint_session(folder: Path | None) -> Iterator[StopRequest]:
    """What a checkpointed run holds from start to end: the folder's lock (after which stale
    temporary files are removed) and SIGINT / SIGTERM deferred to the :class:`StopRequest` it
    yields, which the run checks between chunks. Without a folder: nothing, a request that never
    fires, and the signal handlers left as they are.

    Raises
    ------
    CheckpointError
        Another run holds the folder.
    """
    request = StopRequest(folder)
    if folder is None:
        yield request
        return
    with _folder_lock(folder), _signals_between_chunks(request):
        _remove_stale_temporaries(folder)
        yield request
