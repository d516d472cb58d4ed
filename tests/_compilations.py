"""What XLA compiles during a piece of code: the programs' names and the package files that dispatched
a JAX operation on its own (outside any compiled program of the package)."""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
import warnings
from collections.abc import Callable, Iterator

import jax


class CompilationLog(logging.Handler):
    """Records every compilation JAX logs while ``jax_log_compiles`` is on."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.names: list[str] = []
        self.files: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith("Finished XLA compilation of "):
            return
        self.names.append(message.split(" of ", 1)[1].split(" in ")[0])
        frames = [f.filename.replace(os.sep, "/") for f in traceback.extract_stack()]
        package = [f.split("bayes_maxmargin/", 1)[1] for f in frames if "/bayes_maxmargin/" in f]
        if package and package[-1] != "core/compilation.py":  # the innermost package frame dispatched it
            self.files.append(package[-1])

    def during(self, run: Callable[[], object]) -> list[str]:
        """The names of the programs compiled while ``run()`` runs."""
        self.names.clear()
        run()
        return list(self.names)


@contextlib.contextmanager
def compilation_log() -> Iterator[CompilationLog]:
    """A :class:`CompilationLog` of the code inside the block (warnings silenced)."""
    handler = CompilationLog()
    logger = logging.getLogger("jax")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with jax.log_compiles(True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
