"""The Python API for ML engineers: team job profiles as JobSets, and Ray clusters, on the cluster."""

from generator.jobs.connection import ClusterError, connect
from generator.jobs.job import Job, JobList, JobStatus, WaitTimedOut
from generator.jobs.presubmit import Outcome, SubmitRefused
from generator.jobs.ray import ClusterConfiguration, ConfigurationError, RayCluster, RayClusterDetails, RayClusterStatus

__all__ = ["ClusterConfiguration", "ClusterError", "ConfigurationError", "Job", "JobList", "JobStatus", "Outcome",
           "RayCluster", "RayClusterDetails", "RayClusterStatus", "SubmitRefused", "WaitTimedOut", "connect"]
