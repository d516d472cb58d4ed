"""Atomic file writes: a crash or an interrupt during a write never leaves a half-written file in
place of a good one, and the temporary files of a process killed while it wrote (SIGKILL, a power
cut) are removed by the next save or checkpointed run in the folder
(:func:`remove_stale_temporaries`)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["NETCDF_ENGINE", "atomic_path", "remove_stale_temporaries", "write_config", "write_json", "write_text"]

#: The netCDF engine that writes and reads ``idata.nc`` files (the DataTree of a fit, saved models'
#: member, checkpoint draws; HDF5 through h5py, a declared dependency).
NETCDF_ENGINE = "h5netcdf"


#: A short tag of this host in the names of temporary files: on a file system that several hosts share,
#: a process id says whether the writer runs only on the host that wrote it.
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:4]
#: Names of the temporary files of :func:`atomic_path`, ``.bmm-<host>-<pid>-<random>.tmp`` (at most 30
#: characters, whatever the length of the target's name, so that every name the file system accepts can
#: be written), and of those of earlier versions, ``.<target>.<pid>.<random>.tmp``.
_TEMP_NAME = re.compile(r"\.bmm-(?P<host>[0-9a-f]{4})-(?P<pid>\d{1,10})-[0-9a-f]{8}\.tmp")
_OLD_TEMP_NAME = re.compile(r"\..+\.(?P<pid>\d{1,10})\.[0-9a-f]{16}\.tmp")
#: Seconds after its last change when a temporary file is stale whatever its writer (no write takes
#: that long between two changes of its file).
STALE_AGE_S = 24 * 3600.0


def _temp_file(path: Path) -> Path:
    """Create an empty file of a unique, short name in ``path``'s folder (``O_EXCL``, so two writers,
    threads or processes, never share one) with the permissions an ordinary ``open`` gives."""
    for _ in range(100):
        tmp = path.with_name(f".bmm-{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"could not create a temporary file next to {str(path)!r}")


def _running(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (or may: on Windows, where signal 0 would end it, and
    where the process belongs to another user)."""
    if pid == os.getpid() or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process; a number beyond any process id
        return False
    except OSError:  # PermissionError: another user's process
        return True
    return True


def _stale(entry: os.DirEntry, now: float, max_age_s: float) -> bool:
    """Whether ``entry`` is a temporary file of :func:`atomic_path` (of this or an earlier version) whose
    writer is gone: a process of this host that no longer runs, or a file unchanged for ``max_age_s``."""
    new, old = _TEMP_NAME.fullmatch(entry.name), _OLD_TEMP_NAME.fullmatch(entry.name)
    if (new or old) is None or not entry.is_file(follow_symlinks=False):
        return False
    try:
        if now - entry.stat(follow_symlinks=False).st_mtime > max_age_s:
            return True
    except OSError:
        return False
    if new is not None and new["host"] != _HOST:
        return False
    return not _running(int((new or old)["pid"]))


def remove_stale_temporaries(folder: str | os.PathLike, *, max_age_s: float = STALE_AGE_S) -> list[Path]:
    """Remove the temporary files that writes through :func:`atomic_path` left in ``folder`` when their
    process died before it could (SIGKILL, a power cut): those of processes of this host that no longer
    run, and any unchanged for ``max_age_s`` seconds. The file of a running writer (or of a process of
    another host sharing the file system) stays, unless it is that old.

    Parameters
    ----------
    folder : path-like
        The folder (nothing happens where it does not exist).
    max_age_s : float, default :data:`STALE_AGE_S` (a day)
        Age from which any temporary file of the library is stale (those of other hosts too).

    Returns
    -------
    list of Path
        The files removed.
    """
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if _stale(entry, now, max_age_s):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


#: errno values of a file system that refuses hard links (FAT, some network and FUSE file systems).
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}


def _publish_new(tmp: Path, path: Path) -> None:
    """Put ``tmp`` at ``path`` only if nothing is there, atomically: the check and the publish are one
    operation (a hard link, which fails when ``path`` exists), so of two writers racing for the same
    new ``path`` exactly one wins and the other gets :class:`FileExistsError`. Where the file system
    has no hard links, ``path`` is first claimed with an exclusive create (``O_EXCL``, still one winner)
    and then replaced by ``tmp``."""
    message = f"{str(path)!r} already exists; pass overwrite=True to replace it, or choose another path."
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(message) from None
    except (OSError, NotImplementedError) as err:
        if isinstance(err, OSError) and err.errno not in _NO_HARD_LINKS:
            raise
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            raise FileExistsError(message) from None
        os.replace(tmp, path)
    else:
        tmp.unlink()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield a new, empty temporary file next to ``path``, of a name no other writer uses; on success
    it is flushed to disk and put at ``path``, on any exception it is removed and ``path`` is left as
    it was.

    With ``overwrite=True`` the temporary file is renamed onto ``path`` (``os.replace``, atomic on
    POSIX and Windows). With ``overwrite=False`` an existing ``path`` is never replaced: the publish
    checks and writes in one atomic step (see :func:`_publish_new`) and raises
    :class:`FileExistsError` if ``path`` exists by then.
    """
    path = Path(path)
    tmp = _temp_file(path)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            _publish_new(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj: Any, **kwargs: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (``kwargs`` go to :func:`json.dumps`)."""
    write_text(path, json.dumps(obj, **{"indent": 2, **kwargs}))


def write_config(path: str | os.PathLike, cfg: Any) -> None:
    """Write a run configuration (OmegaConf node or mapping) as YAML to ``path`` atomically, its
    interpolations resolved (``OmegaConf.to_yaml(cfg, resolve=True)``)."""
    from omegaconf import DictConfig, OmegaConf

    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    write_text(path, OmegaConf.to_yaml(cfg, resolve=True))
