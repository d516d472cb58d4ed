"""Discriminative factor models (Henao et al. 2014, Sec. 5): Gibbs and VB-EM."""
