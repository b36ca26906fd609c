"""fleetgen: compile team and cluster files into GitOps manifests for GPU Kubernetes clusters."""

__version__ = "0.2.0"
