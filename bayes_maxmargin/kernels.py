"""Composable covariance functions of :class:`~bayes_maxmargin.GPBSVM` and
:class:`~bayes_maxmargin.FactorBSVM`: kernel objects that add (``+``), multiply (``*``) and scale, and
the parameter tuples they hold.

Examples
--------
>>> from bayes_maxmargin.kernels import ARD, RBF, Linear
>>> kernel = RBF(lengthscale=2.0) + Linear()
>>> kernel
RBF(lengthscale=2.0) + Linear()
"""

from bayes_maxmargin.core.kernels import (
    ARD,
    RBF,
    ARDParams,
    Constant,
    ConstantParams,
    Kernel,
    Linear,
    LinearParams,
    PolyParams,
    Polynomial,
    Product,
    ProductParams,
    Scaled,
    ScaledParams,
    SEParams,
    Sum,
    SumParams,
)

__all__ = ["ARD", "RBF", "ARDParams", "Constant", "ConstantParams", "Kernel", "Linear", "LinearParams", "PolyParams",
           "Polynomial", "Product", "ProductParams", "SEParams", "Scaled", "ScaledParams", "Sum", "SumParams"]
