"""The posterior contract: what a fitted posterior offers, as :class:`typing.Protocol` classes.

A fit keeps one typed posterior object, a NamedTuple of its family's ``posterior`` module
(:mod:`bayes_maxmargin.models.gp.posterior`, :mod:`bayes_maxmargin.models.linear.posterior`,
:mod:`bayes_maxmargin.models.factor.posterior`, :mod:`bayes_maxmargin.models.projection.posterior`;
Luts & Ormerod's fits are linear posteriors built by :mod:`bayes_maxmargin.models.luts.posterior`). Every
one is a :class:`Posterior`: it gives the mean and variance of the latent function at new inputs, all that
a prediction takes. A Gaussian posterior that can
leave its own training rows out is also a :class:`LeaveOneOut` posterior, from whose moments a fit learns
its probit link (``GPBSVM(calibrate=True)``). An estimator asks which by type, ``isinstance`` on a fitted
posterior or ``issubclass`` on the posterior class an inference method fits
(:attr:`~bayes_maxmargin.estimators.gp.GPMethod.posterior`), never by the method's name.

Examples
--------
>>> from bayes_maxmargin.core.posterior import LeaveOneOut, Posterior
>>> from bayes_maxmargin.models.gp.posterior import DrawsPosterior, ModePosterior
>>> issubclass(ModePosterior, Posterior), issubclass(ModePosterior, LeaveOneOut)
(True, True)
>>> issubclass(DrawsPosterior, LeaveOneOut)  # MCMC draws: no leave-one-out moments of their own
False
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["LeaveOneOut", "Posterior"]


@runtime_checkable
class Posterior(Protocol):
    """A fitted posterior: the moments of the latent function f_* at new inputs."""

    def latent_moments(self, X: Any, *args: Any) -> tuple[Any, Any]:
        """Mean and variance of f_* at the rows of ``X`` (the family's design: GP inputs, the linear
        design with its intercept column, centred factor inputs), in the fit's precision where the family
        takes a ``dtype``."""
        ...


@runtime_checkable
class LeaveOneOut(Protocol):
    """A Gaussian posterior with leave-one-out moments of f at its own training rows
    (:func:`~bayes_maxmargin.core.predict.loo_cavity`)."""

    def loo_latent(self, X: Any, y: Any, gamma: Any, dtype: Any = None, groups: np.ndarray | None = None,
                   rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Leave-one-out mean and variance of f_n at the training inputs ``X`` (the rows ``rows`` of the
        fit's; labels ``y`` coded +-1, the fit's ``gamma``), computed in ``dtype``; with ``groups`` (labels
        of groups of identical rows) each row's group is left out with it."""
        ...
