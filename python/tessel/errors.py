"""The one exception type of the tessel package."""


class Error(Exception):
    """A failure of the server or the runtime. `code` is the gRPC status code name
    ("NOT_FOUND", ...) for the client, or the tessel_status name ("TESSEL_ERROR_NOT_FOUND", ...)
    for the runtime; the message names the problem and the fix."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
