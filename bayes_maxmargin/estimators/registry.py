"""The inference methods of an estimator family, one value each.

As BlackJAX's ``SamplingAlgorithm`` holds a sampler's functions, a :class:`Method` holds one inference
method's fit step and what it can do (draws chains, takes checkpoints, its default gamma0, the OpenBLAS
threads it runs with, ...). A family's :class:`Registry` holds its methods under the names its estimator's
``inference`` parameter takes. The estimator looks its method up once, in its parameter check, and asks
the method, never the name, what to do; the families extend :class:`Method` with their own capabilities
(:class:`~bayes_maxmargin.estimators.gp.GPMethod`).

Examples
--------
>>> from bayes_maxmargin.estimators.gp import GP_METHODS
>>> GP_METHODS.check("gibbs").samples, GP_METHODS.check("ecm").samples
(True, False)
>>> GP_METHODS.names(lambda m: m.checkpoints)
('ecm', 'fitc', 'gibbs', 'nuts', 'vi', 'svi')
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bayes_maxmargin.core.checks import check_option

__all__ = ["Method", "Registry", "Settings"]


@dataclass(frozen=True, kw_only=True)
class Method:
    """One inference method of an estimator.

    Attributes
    ----------
    name : str
        The value of the estimator's ``inference`` parameter that selects it.
    fit : callable
        Its fit step, called with the estimator first (the signature is the family's).
    samples : bool
        Whether it draws Markov chains (whose mixing the fit checks).
    checkpoints : bool
        Whether its fit takes ``checkpoint`` / ``resume`` (:meth:`_BayesianSVMClassifier._run_io`).
    gamma0 : float
        gamma0 where the estimator's ``gamma0=None``.
    samples_gamma0 : bool
        Whether it samples gamma0 under ``gamma0_prior``.
    mode : bool
        Whether it fits a mode, so that ``gamma_prior`` gives gamma's MAP.
    approximation : str or None
        What ``idata_``'s posterior group draws from when the fit is not a sampler's.
    blas_threads : int or None
        OpenBLAS threads during its fits and predictions (None: as set in the process).
    """

    name: str
    fit: Callable[..., Any]
    samples: bool = False
    checkpoints: bool = False
    gamma0: float = 0.0
    samples_gamma0: bool = False
    mode: bool = False
    approximation: str | None = None
    blas_threads: int | None = None


M = TypeVar("M", bound=Method)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The parameters of a fit, checked once by the estimator, with its method's defaults filled in: what
    every family's settings hold (the families add their own fields). Each field is the estimator
    parameter of its name, except ``method`` (``inference``, the family's :class:`Registry`) and
    ``run_io``, the fit's checkpoint / resume folders.
    """

    method: Method
    precision: str
    gamma: float
    gamma0: float
    gamma_prior: tuple[float, float] | None
    gamma0_prior: tuple[float, float] | None
    num_samples: int
    num_warmup: int
    num_chains: int
    thin: int
    max_iter: int | None
    tol: float
    solver: str
    accelerate: bool
    batch_size: int | None
    devices: int | None
    run_io: dict[str, Any] = field(default_factory=dict)

    @property
    def inference(self) -> str:
        """The name of the inference method."""
        return self.method.name


class Registry(Mapping[str, M], Generic[M]):
    """A family's inference methods by name, in the order they are listed in errors.

    Parameters
    ----------
    *methods : Method
        The methods; their names must differ.
    """

    def __init__(self, *methods: M) -> None:
        self._methods = {m.name: m for m in methods}
        if len(self._methods) != len(methods):
            raise ValueError(f"two methods share a name in {[m.name for m in methods]}")

    def __getitem__(self, name: str) -> M:
        return self._methods[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._methods)

    def __len__(self) -> int:
        return len(self._methods)

    def check(self, value: Any, name: str = "inference") -> M:
        """The method ``value`` names; an InvalidParameterError naming ``name``, the value and the choices
        where it names none."""
        return self._methods[check_option(name, value, tuple(self._methods))]

    def lookup(self, value: Any) -> M | None:
        """The method ``value`` names, or None for any other value (unchecked settings)."""
        return self._methods.get(value) if isinstance(value, str) else None

    def names(self, capability: Callable[[M], Any]) -> tuple[str, ...]:
        """The names of the methods for which ``capability(method)`` is true, in order."""
        return tuple(name for name, m in self._methods.items() if capability(m))
