"""The Python API for ML engineers: jobs (a team's profiles, or defined in Python) as JobSets, Ray
clusters, and the queues a user may submit to, on the cluster."""

from generator.connection import ClusterError, Connection, connect, logout
from generator.jobs.job import ConfigurationError, Job, JobList, JobStatus, WaitTimedOut
from generator.jobs.presubmit import Outcome, SubmitRefused
from generator.jobs.queues import QueueInfo, queues
from generator.jobs.ray import ClusterConfiguration, RayCluster, RayClusterDetails, RayClusterStatus

__all__ = ["ClusterConfiguration", "ClusterError", "ConfigurationError", "Connection", "Job", "JobList", "JobStatus",
           "Outcome", "QueueInfo", "RayCluster", "RayClusterDetails", "RayClusterStatus", "SubmitRefused",
           "WaitTimedOut", "connect", "logout", "queues"]
