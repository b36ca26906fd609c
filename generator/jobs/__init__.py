"""The Python API for ML engineers: team job profiles as JobSets on the cluster."""

from generator.jobs.connection import ClusterError, connect
from generator.jobs.job import Job, JobList, JobStatus

__all__ = ["ClusterError", "Job", "JobList", "JobStatus", "connect"]
