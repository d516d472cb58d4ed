"""Bayesian max-margin classifiers (Bayesian SVMs) on JAX and NumPyro.

The SVM hinge loss as a data-augmented pseudo-likelihood (Polson & Scott 2011), and around it the
models of Henao et al. (2014), Wenzel et al. (2017), Luts & Ormerod (2014) and Chen et al. (2015),
each fitted by hand-written conjugate Gibbs, EM, VB and SVI kernels compiled with XLA.
"""

from bayes_maxmargin._version import __version__
from bayes_maxmargin.core.compilation import use_compilation_cache
from bayes_maxmargin.data import Dataset, list_datasets, load_dataset
from bayes_maxmargin.diagnostics import MixingWarning, SeparableClassesWarning, convergence_summary, to_inference_data
from bayes_maxmargin.engine.mcmc import NonFiniteStateError
from bayes_maxmargin.engine.nuts import DivergenceWarning, DivergentSamplerError
from bayes_maxmargin.estimators import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection
from bayes_maxmargin.persistence import InvalidModelFileError, load, save

__all__ = [
    "Dataset",
    "DivergenceWarning",
    "DivergentSamplerError",
    "FactorBSVM",
    "GPBSVM",
    "InvalidModelFileError",
    "LinearBSVM",
    "MaxMarginProjection",
    "MixingWarning",
    "NonFiniteStateError",
    "SeparableClassesWarning",
    "__version__",
    "convergence_summary",
    "list_datasets",
    "load",
    "load_dataset",
    "save",
    "to_inference_data",
    "use_compilation_cache",
]
