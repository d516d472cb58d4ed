"""Discriminant feature extractors that Chen et al. (2015) compare with (Tables 3-4), not in
scikit-learn: kernel Fisher discriminant analysis (KLDA) and local discriminant embedding (LDE),
linear or with a kernel (KLDE). Each is one exact generalised symmetric eigenproblem, of size P x P
(linear LDE) or N x N (the kernel forms: O(N^3) time and O(N^2) memory, exact at the sizes where it
is run, N of a few thousand).

* KLDA (Mika et al. 1999, "Fisher discriminant analysis with kernels"; the multi-class form of
  Baudat & Anouar 2000): with the training kernel matrix K, m_c = K 1_c / n_c and m = K 1 / N,
  maximise alpha' M alpha / alpha' N alpha over alpha in R^N with
  M = sum_c n_c (m_c - m)(m_c - m)' and N = sum_c K_c (I - 1 1' / n_c) K_c' (K_c the columns of class c);
  the L - 1 leading generalised eigenvectors, N regularised as N + eps I with eps = ``reg`` x the
  mean of diag(N) (N is singular: rank at most N - L).
* LDE (Chen, Chang & Liu 2005, "Local discriminant embedding and its variants", CVPR): the
  within-class graph joins each point to its ``n_neighbors`` nearest neighbours of the same class,
  the between-class graph to its ``n_neighbors`` nearest of other classes (symmetrised, weights
  exp(-||x_i - x_j||^2 / t) with t the mean squared distance of the joined pairs); with the
  Laplacians L_w, L_b, maximise v' X' L_b X v / v' X' L_w X v, the leading generalised
  eigenvectors (X' L_w X regularised as above). KLDE replaces X by K (features k(x_i, .)).

The projected features then feed a classifier (Chen et al. feed them to their latent SVM; the driver
:mod:`bayes_maxmargin.experiments.chen2015` uses scikit-learn's linear SVC).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

__all__ = ["KernelFisherDiscriminant", "LocalDiscriminantEmbedding", "kernel_matrix"]


def kernel_matrix(X: np.ndarray, Y: np.ndarray, kernel: str | None, gamma: float, degree: int) -> np.ndarray:
    """k(x, y) between the rows of X and Y: ``None`` x'y, ``"rbf"`` exp(-gamma ||x - y||^2),
    ``"poly"`` (gamma x'y + 1)^degree (gamma = 1 / P gives the driver's (x'v / P + 1)^d)."""
    cross = X @ Y.T
    if kernel is None:
        return cross
    if kernel == "rbf":
        d2 = np.sum(X**2, 1)[:, None] + np.sum(Y**2, 1)[None, :] - 2.0 * cross
        return np.exp(-gamma * np.maximum(d2, 0.0))
    if kernel == "poly":
        return (gamma * cross + 1.0) ** degree
    raise ValueError(f"Invalid value for kernel: {kernel!r}; valid options are None, 'rbf', 'poly'")


def _leading_directions(between: np.ndarray, within: np.ndarray, n_components: int, reg: float) -> np.ndarray:
    """The ``n_components`` leading generalised eigenvectors of (between, within + eps I)."""
    from scipy.linalg import eigh

    d = between.shape[0]
    eps = reg * max(float(np.mean(np.diag(within))), np.finfo(float).tiny)
    k = min(n_components, d)
    _, vecs = eigh(between, within + eps * np.eye(d), subset_by_index=(d - k, d - 1))
    return vecs[:, ::-1]


class _Extractor(TransformerMixin, BaseEstimator):
    """Shared fitting state: the training rows (kernel forms), the kernel, the directions."""

    def _gamma(self, X: np.ndarray) -> float:
        return 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)

    def _features(self, X: np.ndarray) -> np.ndarray:
        if self.kernel is None:
            return X
        return kernel_matrix(X, self.X_fit_, self.kernel, self.gamma_, self.degree)

    def _prepare(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        X = np.asarray(X, dtype=float)
        self.classes_, y_idx = np.unique(np.asarray(y), return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 classes in y")
        self.gamma_ = self._gamma(X)
        self.X_fit_ = X
        return X, y_idx, self._features(X)

    def transform(self, X: Any) -> np.ndarray:
        """The projected features, shape (n, n_components)."""
        check_is_fitted(self, "directions_")
        return self._features(np.asarray(X, dtype=float)) @ self.directions_


class KernelFisherDiscriminant(_Extractor):
    """Kernel Fisher discriminant analysis, KLDA (module docstring): L - 1 directions for L classes.

    Parameters
    ----------
    kernel : {"rbf", "poly"}
    gamma : float or None
        Kernel scale (None: 1 / n_features).
    degree : int
        Polynomial degree.
    reg : float
        Regularisation of the within-class scatter, relative to its mean diagonal.
    """

    def __init__(self, kernel: str = "rbf", gamma: float | None = None, degree: int = 2, reg: float = 1e-3) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.reg = reg

    def fit(self, X: Any, y: Any) -> "KernelFisherDiscriminant":
        _, y_idx, K = self._prepare(X, y)
        m = K.mean(1)
        between = np.zeros((K.shape[0],) * 2)
        within = np.zeros_like(between)
        for c in range(len(self.classes_)):
            Kc = K[:, y_idx == c]
            d = Kc.mean(1) - m
            between += Kc.shape[1] * np.outer(d, d)
            centred = Kc - Kc.mean(1, keepdims=True)
            within += centred @ centred.T
        self.directions_ = _leading_directions(between, within, len(self.classes_) - 1, self.reg)
        return self


class LocalDiscriminantEmbedding(_Extractor):
    """Local discriminant embedding, LDE, and its kernel form KLDE (module docstring).

    Parameters
    ----------
    n_components : int
    kernel : {None, "rbf", "poly"}
        None: LDE on the features; otherwise KLDE.
    n_neighbors : int
        Neighbours of the within- and between-class graphs.
    gamma, degree, reg
        As in :class:`KernelFisherDiscriminant`.
    """

    def __init__(self, n_components: int = 2, kernel: str | None = None, n_neighbors: int = 5,
                 gamma: float | None = None, degree: int = 2, reg: float = 1e-3) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.n_neighbors = n_neighbors
        self.gamma = gamma
        self.degree = degree
        self.reg = reg

    def fit(self, X: Any, y: Any) -> "LocalDiscriminantEmbedding":
        X, y_idx, F = self._prepare(X, y)
        sq = np.sum(X**2, 1)
        d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0)
        np.fill_diagonal(d2, np.inf)
        same = y_idx[:, None] == y_idx[None, :]
        laplacians = []
        for mask in (same, ~same):
            dist = np.where(mask, d2, np.inf)
            k = min(self.n_neighbors, X.shape[0] - 1)
            nearest = np.argsort(dist, axis=1)[:, :k]
            adj = np.zeros_like(d2, dtype=bool)
            rows = np.repeat(np.arange(X.shape[0]), k)
            adj[rows, nearest.ravel()] = np.isfinite(dist[rows, nearest.ravel()])
            adj |= adj.T
            t = float(np.mean(d2[adj])) if adj.any() else 1.0
            W = np.where(adj, np.exp(-np.where(adj, d2, 0.0) / t), 0.0)
            laplacians.append(np.diag(W.sum(1)) - W)
        within, between = (F.T @ lap @ F for lap in laplacians)
        self.directions_ = _leading_directions(between, within, self.n_components, self.reg)
        return self
