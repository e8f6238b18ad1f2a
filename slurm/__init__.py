"""Slurm's commands under their names, thin over the client library and the one table of job options
(docs/slurm.md): a script or tool written for Slurm runs unchanged. Installed apart, as a site chooses
(``gang slurm install``), never shadowing a real Slurm unasked."""
