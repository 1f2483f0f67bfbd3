"""The one exception a user sees: a one-line message naming the field or file and the fix."""


class TestbedError(Exception):
    """Bad input or a failed run. The CLI prints it as one line and exits with code 2."""

    __test__ = False  # not a pytest test class, despite the name
