"""The error classes, under their historical import path.

The hierarchy lives in the client kernel's leaf module :mod:`coordinator.client.errors`;
this module re-exports exactly its ``__all__``, so ``from ordered.errors import ...``
reaches every public error and a new one needs no second list here.
"""

from coordinator.client import errors as _kernel_errors
from coordinator.client.errors import *  # noqa: F403  (exactly the kernel's __all__)

__all__ = list(_kernel_errors.__all__)
