"""The GP Bayesian SVM (Henao et al. 2014): Gibbs with fixed or sampled kernel parameters, ECM with
ML-II, FITC, full-batch VI and the S-BSVM of Wenzel et al. (2017)."""
