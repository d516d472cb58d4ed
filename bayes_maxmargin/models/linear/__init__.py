"""The linear Bayesian SVM (Polson & Scott 2011; Henao et al. 2014): Gibbs, EM and stochastic VI."""
