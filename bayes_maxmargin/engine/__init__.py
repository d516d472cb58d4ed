"""Loops that know no model: the chunked MCMC driver (chains, checkpoints, progress), NUTS on a
model's marginal program, the EM / ECM / CAVI fixed-point loops and the streaming natural-gradient
SVI driver. A model hands them its kernel or update as a pure function."""
