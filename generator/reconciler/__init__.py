"""The GPU health reconciler: cordon nodes with faulty GPUs, safely, and release its own cordons.

Decision logic is a pure function (`decide`), so every safety rule is unit-tested without I/O;
sources (Prometheus, Loki) and the executor (Kubernetes API) sit around it.
"""
