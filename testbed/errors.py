"""The one exception a user sees: a one-line message naming the field or file and the fix; and where the traceback
of anything else (a bug) is written."""
import os
import tempfile
import traceback
from pathlib import Path


class TestbedError(Exception):
    """Bad input or a failed run. The CLI prints it as one line and exits with code 2."""

    __test__ = False  # not a pytest test class, despite the name


def with_article(noun: str) -> str:
    """'an int', 'a list': a noun of a message (a type's name, say) with its indefinite article, by its first
    letter (a vowel: "an")."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def write_crash_log(err: BaseException, folder: Path | None = None) -> Path:
    """The traceback of `err` in folder/error.log (a new file in the temporary folder where none is given)."""
    text = "".join(traceback.format_exception(err))
    if folder is not None:
        path = Path(folder) / "error.log"
        path.write_text(text)
        return path
    handle, name = tempfile.mkstemp(prefix="testbed-error-", suffix=".log")
    with os.fdopen(handle, "w") as f:
        f.write(text)
    return Path(name)


class PluginError(TestbedError):
    """User code a scenario named (a strategy, selector, model factory, loader) broke its interface, or raised:
    one line naming the plugin (its reference, and the file and line of the hook where Python knows them) and the
    rule it broke; its own exception, where it raised one, chained as __cause__."""


def refused_options(section: str, name: str, err: Exception) -> TestbedError:
    """A plugin that refused the options a scenario gave it (its constructor's, or create's, TypeError or
    ValueError), in one line naming the section: `section`.options: 'name' refused its options (...)."""
    return TestbedError(f"{section}.options: '{name}' refused its options ({type(err).__name__}: "
                        f"{' '.join(str(err).split())}); fix them")
