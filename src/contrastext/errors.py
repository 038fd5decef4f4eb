"""Errors a job reports to its user as one line (``contrastext <job>: message``, exit 2), not a traceback."""


class InputError(ValueError):
    """Bad input found before or during the work: the message names what is wrong and where."""
