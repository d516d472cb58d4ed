"""Seeded stratified train/test splits."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

__all__ = ["cross_fit_folds", "train_test_split_stratified"]


def train_test_split_stratified(
    X: Any,
    y: Any,
    *,
    test_size: float | int = 0.3,
    random_state: int | np.random.RandomState | None = 0,
    groups: Any = None,
) -> tuple[Any, ...]:
    """Split data into train and test sets that keep the class proportions.

    A thin wrapper over :func:`sklearn.model_selection.train_test_split` with
    ``stratify=y`` and a fixed default seed, so that repeated runs give the
    same split.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Features (rows are split; the type is kept).
    y : array-like of shape (n_samples,)
        Class labels; every class needs at least two samples.
    test_size : float or int, default=0.3
        Fraction (in (0, 1)) or number of samples in the test set.
    random_state : int, RandomState or None, default=0
        Seed of the shuffle.
    groups : array-like of shape (n_samples,) or None, default=None
        Optional per-sample cluster ids, split along with the rows.

    Returns
    -------
    tuple
        ``(X_train, X_test, y_train, y_test)``, followed by
        ``(groups_train, groups_test)`` when ``groups`` is given.
    """
    arrays = [X, y] if groups is None else [X, y, groups]
    return tuple(
        train_test_split(
            *arrays, test_size=test_size, random_state=random_state, stratify=y
        )
    )


def cross_fit_folds(y: Any, groups: Any, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Folds for cross-fitting: ``(train, held)`` row indices of ``n_folds`` fits whose held-out rows
    together cover every row once.

    The held-out sets are scikit-learn's :class:`~sklearn.model_selection.StratifiedGroupKFold` folds (seeded,
    shuffled): the class proportions kept, and rows of one group (e.g. repeated inputs) held out together,
    so that no held-out row has a twin among the rows its predictor was fitted on. Where every row is a
    group of its own they are :class:`~sklearn.model_selection.StratifiedKFold`'s, which does the same in
    linear time (the grouped search over folds took 50 ms on 189 rows, a sixth of an ECM fit there).
    Every training set has the same size, ``n`` less the largest held-out set (a fold whose held-out set is
    smaller also leaves out that many of its other rows, drawn from ``seed``), so that one compiled program
    fits them all.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class labels.
    groups : array-like of shape (n,) or None
        Group labels; None: every row its own group.
    n_folds : int
        Number of folds, at least 2.
    seed : int
        Seed of the shuffle and of the rows left out to equalise the training sets.

    Returns
    -------
    list of (ndarray, ndarray)
        Sorted training and held-out indices of each fold.

    Raises
    ------
    ValueError
        Where a class has fewer than two groups of rows, so that a training set would lack it.

    Examples
    --------
    >>> y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    >>> folds = cross_fit_folds(y, None, 3, seed=0)
    >>> sorted(np.concatenate([held for _, held in folds]).tolist()) == list(range(10))
    True
    >>> {train.size for train, _ in folds}, all(np.intersect1d(t, h).size == 0 for t, h in folds)
    ({6}, True)
    """
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    y = np.asarray(y)
    groups = np.arange(y.shape[0]) if groups is None else np.asarray(groups)
    for label in np.unique(y):
        distinct = np.unique(groups[y == label]).size
        if distinct < 2:
            raise ValueError(
                f"cross-fitting needs at least two distinct rows of every class; class {label.tolist()!r} has "
                f"{distinct}")
    n_groups = np.unique(groups).size
    grouped = n_groups < y.shape[0]
    largest = np.unique(y, return_counts=True)[1].max()  # StratifiedKFold needs a class of n_splits rows
    splitter = (StratifiedGroupKFold if grouped else StratifiedKFold)(
        n_splits=min(n_folds, n_groups if grouped else largest), shuffle=True, random_state=seed)
    with warnings.catch_warnings():  # a class with fewer rows than folds: held out in fewer folds, as checked
        warnings.filterwarnings("ignore", "The least populated class", UserWarning)
        held = [h for _, h in splitter.split(np.zeros((y.shape[0], 1)), y, groups if grouped else None)]
    size = y.shape[0] - max(h.size for h in held)
    rng = np.random.default_rng(seed)
    return [(_drop_from_largest(np.setdiff1d(np.arange(y.shape[0]), h), y, size, rng), np.sort(h)) for h in held]


def _drop_from_largest(rows: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` of ``rows``: a random row of the class with the most rows left out, one at a time, so that
    no class loses its last rows."""
    rows = list(rng.permutation(rows))
    while len(rows) > size:
        labels, counts = np.unique(y[rows], return_counts=True)
        rows.remove(next(r for r in rows if y[r] == labels[np.argmax(counts)]))
    return np.sort(np.asarray(rows, dtype=np.intp))
