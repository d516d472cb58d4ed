"""Building blocks every model shares: the data augmentation and its distributions, special
functions, Cholesky linear algebra, covariance functions, the probit predictive, compilation and
atomic file writes. Nothing here knows a model, an inference loop or an estimator."""
