"""The scikit-learn estimators: each maps ``inference=`` to a model family's algorithm and keeps
the fitted posterior; one-vs-rest multi-class fits run the K binary problems as one program."""

from bayes_maxmargin.estimators.factor import FactorBSVM
from bayes_maxmargin.estimators.gp import GPBSVM
from bayes_maxmargin.estimators.linear import LinearBSVM
from bayes_maxmargin.estimators.projection import MaxMarginProjection

__all__ = ["FactorBSVM", "GPBSVM", "LinearBSVM", "MaxMarginProjection"]
