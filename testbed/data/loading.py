"""The `data:` section's dataset, loaded: its loader (built-in, registered or user code) called with the
section's folder and options, and what it returns checked before anything trains on it. Called by the
composition root (testbed/build.py); the section itself stays plain data (testbed/schema/data.py)."""
from __future__ import annotations

from testbed.data.dataset import Dataset
from testbed.errors import PluginError, TestbedError


def load_dataset(section) -> Dataset:
    """`section`: the scenario's validated `data:` section (schema/data.py's Data)."""
    where = {"root": section.root} if section.root is not None else {}
    try:
        dataset = section.loader()(**where, **section.options)
    except (OSError, ValueError) as err:  # a file problem names its path; anything else is an option's value
        about_files = isinstance(err, OSError) or (section.root is not None and str(section.root) in str(err))
        raise TestbedError(f"data.{'root' if about_files else 'options'}: {err}") from None
    except Exception as err:  # noqa: BLE001 - only a user's loader gets here: their bug, in one line
        raise PluginError(f"data.name: '{section.name}' raised {type(err).__name__}: {' '.join(str(err).split())}; "
                          "fix the loader") from err
    if not isinstance(dataset, Dataset):
        raise PluginError(f"data.name: '{section.name}' returned {type(dataset).__name__}, not a Dataset; return "
                          "testbed.data.Dataset (docs/extending.md)")
    problems = dataset.problems()
    if problems:
        raise PluginError(f"data.name: '{section.name}' returned a dataset that cannot train: {problems[0]}")
    return dataset
