"""The Python API for ML engineers: team job profiles as JobSets on the cluster."""

from generator.jobs.connection import ClusterError, connect
from generator.jobs.job import Job, JobList, JobStatus, WaitTimedOut
from generator.jobs.presubmit import Outcome, SubmitRefused

__all__ = ["ClusterError", "Job", "JobList", "JobStatus", "Outcome", "SubmitRefused", "WaitTimedOut", "connect"]
