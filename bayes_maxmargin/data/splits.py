"""Seeded stratified train/test splits."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

__all__ = ["train_test_split_stratified"]


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
