"""The extended Bayesian SVMs of Luts & Ormerod (2014): mean-field VB (Algorithms 1-4) and Gibbs
(Appendices A-C) for mixed models, the Laplace-zero prior and missing covariates."""
