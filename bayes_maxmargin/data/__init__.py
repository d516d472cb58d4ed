"""Data layer: input validation, label coding, named datasets and splits.

Pure NumPy / scikit-learn; nothing here imports JAX.
"""

from bayes_maxmargin.data.datasets import (
    DataDirNotSetError,
    Dataset,
    list_datasets,
    load_dataset,
    register_dataset,
)
from bayes_maxmargin.data.labels import BinaryLabelEncoder
from bayes_maxmargin.core.checks import InvalidParameterError, check_option, check_scalar_param
from bayes_maxmargin.data.splits import train_test_split_stratified
from bayes_maxmargin.data.validation import check_array_2d, check_n_features, check_X_y

__all__ = [
    "BinaryLabelEncoder",
    "DataDirNotSetError",
    "Dataset",
    "InvalidParameterError",
    "check_X_y",
    "check_array_2d",
    "check_n_features",
    "check_option",
    "check_scalar_param",
    "list_datasets",
    "load_dataset",
    "register_dataset",
    "train_test_split_stratified",
]
