"""The fitted posterior of the max-margin discriminant projection (Chen et al. 2015), in the form every
family predicts with (:class:`~bayes_maxmargin.core.posterior.Posterior`).

The classifier of problem l acts on the projected features, f_l(x) = w_l' z + b_l with z = A_l' h(x)
(h the inputs for MMLDP, the kernel features K(V, x) for KMMDP, eq. 17), and the paper predicts with
its output averaged over the draws, U_l(x) = mean_t (w_lt' A_lt' h + b_lt) (eq. 23-24), linear in h
with the coefficient c_l = mean_t A_lt w_lt. The averages are the sampler's running means over every
iteration after warm-up; the spread of f_l(x) over the draws is that of the kept (thinned) draws of
(A_l w_l, b_l).

Examples
--------
>>> import numpy as np
>>> from bayes_maxmargin.models.projection.posterior import ProjectionPosterior
>>> draws = np.array([[[1.0, 0.0]], [[3.0, 0.0]]])  # two draws of one problem's c = A w, 2 features
>>> post = ProjectionPosterior(np.array([[2.0, 0.0]]), np.zeros(1), np.ones((1, 2, 1)), draws, np.zeros((2, 1)))
>>> mean, var = post.latent_moments(np.array([[1.0, 5.0]]))
>>> mean.tolist(), var.tolist()
([[2.0]], [[1.0]])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["ProjectionPosterior"]


class ProjectionPosterior(NamedTuple):
    """The averaged classifier, its projection and the kept draws of one fit of L binary problems.

    Attributes
    ----------
    coef : ndarray, shape (L, W)
        c_l = mean_t A_lt w_lt, the averaged output's coefficient on the W features h (eq. 24).
    intercept : ndarray, shape (L,)
        mean_t b_lt.
    projection : ndarray, shape (L, W, K)
        mean_t A_lt, the posterior-mean projection.
    coef_draws : ndarray of shape (S, L, W), or None
        Kept draws of A_l w_l (chains stacked); None where they were not kept (files of earlier releases).
    intercept_draws : ndarray of shape (S, L), or None
        Kept draws of b_l.
    """

    coef: np.ndarray
    intercept: np.ndarray
    projection: np.ndarray
    coef_draws: np.ndarray | None
    intercept_draws: np.ndarray | None

    def decision(self, H: np.ndarray) -> np.ndarray:
        """U_l(x) = c_l' h + mean_t b_lt at the rows of ``H`` (eq. 23-24), shape (n, L)."""
        return H @ self.coef.T + self.intercept

    def latent_moments(self, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The averaged output U_l(x) (eq. 24) and the variance of w_l' A_l' h + b_l over the kept draws,
        each of shape (n, L): h' S_c h + 2 h' s_cb + s_b from the draws' covariance of (c_l, b_l). A
        ValueError where the draws of A w were not kept."""
        if self.coef_draws is None:
            raise ValueError("this fit holds no draws of A w (a file of an earlier release): refit it for the "
                             "spread of the classifier's output")
        H = np.asarray(H, dtype=np.float64)
        design = np.column_stack([H, np.ones(H.shape[0])])
        draws = np.concatenate([self.coef_draws, self.intercept_draws[..., None]], axis=-1).astype(np.float64)
        centred = draws - draws.mean(axis=0)
        cov = np.einsum("slw,slv->lwv", centred, centred) / max(draws.shape[0] - 1, 1)
        var = np.column_stack([np.sum((design @ c) * design, axis=1) for c in cov])
        return self.decision(H), np.maximum(var, 0.0)

    def projected(self, H: np.ndarray) -> np.ndarray:
        """Posterior-mean projected features mean_t(A_lt)' h, the L problems side by side: (n, L K)."""
        return np.einsum("nd,ldk->nlk", H, self.projection).reshape(H.shape[0], -1)
