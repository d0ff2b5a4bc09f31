"""Exceptions: every library status other than OK raises a subclass of veloxquant.Error carrying
the status code (.status), its name (.status_name) and the library's message."""


class Error(Exception):
    """A libveloxquant call failed. .status is the library's status code (negative), .status_name
    its name (e.g. "INVALID_ARG"), str(e) the library's message."""

    status = 0
    status_name = "ERROR"

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(Error, ValueError):
    status, status_name = -1, "INVALID_ARG"


class NoMemoryError(Error, MemoryError):
    status, status_name = -2, "NO_MEMORY"


class UnsupportedError(Error):
    status, status_name = -3, "UNSUPPORTED"


class FileError(Error, OSError):
    status, status_name = -4, "IO"


class BadFormatError(Error):
    status, status_name = -5, "BAD_FORMAT"


class NonFiniteError(Error, ValueError):
    status, status_name = -6, "NON_FINITE"


class RangeError(Error, ValueError):
    status, status_name = -7, "RANGE"


class CapacityError(Error):
    status, status_name = -8, "CAPACITY"


class NotFoundError(Error, LookupError):
    status, status_name = -9, "NOT_FOUND"


class InternalError(Error):
    status, status_name = -10, "INTERNAL"


_BY_STATUS = {c.status: c for c in (InvalidArgumentError, NoMemoryError, UnsupportedError,
                                    FileError, BadFormatError, NonFiniteError, RangeError,
                                    CapacityError, NotFoundError, InternalError)}


def raise_for(status, message):
    """Raises the exception class of a library status (no-op for OK = 0)."""
    if status == 0:
        return
    cls = _BY_STATUS.get(status, Error)
    raise cls(message, status)
