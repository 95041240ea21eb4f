"""Sluice's Python SDK: submit, watch and script bulk data transfers of a
Sluice service from Python and Jupyter.

::

    import sluice

    with sluice.Client() as c:                    # the login of `sluice login`
        job = sluice.TransferData(label="run42", sync_level="checksum")
        job.add_dir("sluice://dtn1/data/run42", "sluice://dtn2/archive/run42")
        j = c.submit(job)
        c.wait(j, progress=True)                  # raises JobFailed naming failed files

:class:`AsyncClient` has the same methods as coroutines. Errors are
:class:`SluiceError`\\ s; the server's are :class:`APIError`\\ s carrying its
problem document. The guide is docs/python.md in Sluice's repository.
"""

__version__ = "0.1.0"

from .aio import AsyncClient
from .client import Client
from .config import Login, config_file, resolve
from .errors import (APIError, BadRequest, Conflict, ConfigError, EventStreamError, Forbidden, Invalid,
                     JobCanceled, JobError, JobFailed, NotFound, ServerUnreachable, SluiceError,
                     Unauthorized, Unavailable)
from .models import DataToken, Endpoint, Estimate, EstimateSample, Event, File, Job, Submitted, User
from .transfer import TransferData

__all__ = [
    "__version__", "Client", "AsyncClient", "TransferData", "Login", "config_file", "resolve",
    "Job", "Submitted", "File", "Endpoint", "Estimate", "EstimateSample", "Event", "User", "DataToken",
    "SluiceError", "ConfigError", "ServerUnreachable", "APIError", "BadRequest", "Unauthorized",
    "Forbidden", "NotFound", "Conflict", "Invalid", "Unavailable", "EventStreamError", "JobError",
    "JobFailed", "JobCanceled",
]
