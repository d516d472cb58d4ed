"""Atomic file writes: a crash or an interrupt during a write never leaves a half-written file in
place of a good one."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["NETCDF_ENGINE", "atomic_path", "write_config", "write_json", "write_text"]

#: The netCDF engine that writes and reads ``idata.nc`` files (the DataTree of a fit, saved models'
#: member, checkpoint draws; HDF5 through h5py, a declared dependency).
NETCDF_ENGINE = "h5netcdf"


def _temp_file(path: Path) -> Path:
    """Create an empty file of a unique name in ``path``'s folder (``O_EXCL``, so two writers, threads
    or processes, never share one) with the permissions an ordinary ``open`` gives."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"could not create a temporary file next to {str(path)!r}")


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
