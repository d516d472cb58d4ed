"""Max-margin discriminant projection (Chen et al. 2015): MMLDP, KMMDP and ssKMMDP by Gibbs."""
