"""Bayesian max-margin classifiers (Bayesian SVMs) on JAX and NumPyro.

The SVM hinge loss as a data-augmented pseudo-likelihood (Polson & Scott 2011), and around it the
models of Henao et al. (2014), Wenzel et al. (2017), Luts & Ormerod (2014) and Chen et al. (2015),
each fitted by hand-written conjugate Gibbs, EM, VB and SVI kernels compiled with XLA.
"""

__version__ = "0.1.0"

from .data import Dataset, list_datasets, load_dataset  # noqa: E402
from .diagnostics import convergence_summary, to_inference_data  # noqa: E402
from .estimators import GPBSVM, LinearBSVM  # noqa: E402
from .factor import FactorBSVM  # noqa: E402
from .inference.driver import NonFiniteStateError  # noqa: E402
from .persistence import InvalidModelFileError, load, save  # noqa: E402
from .projection import MaxMarginProjection  # noqa: E402

__all__ = [
    "Dataset",
    "FactorBSVM",
    "GPBSVM",
    "InvalidModelFileError",
    "LinearBSVM",
    "MaxMarginProjection",
    "NonFiniteStateError",
    "__version__",
    "convergence_summary",
    "list_datasets",
    "load",
    "load_dataset",
    "save",
    "to_inference_data",
]
