"""The scenario: one import for what a run needs of it. Each job has its own module:
- the schema's sections (testbed/schema/: data, fleet, protocol, algorithms, resources, run; scenario.py ties
  them together and checks what spans several),
- reading a file with its `--set` overrides (testbed/scenario_file.py),
- validating it whole: the schema, then what only its built selector answers (testbed/validation.py),
- wording validation errors (testbed/schema/errors.py),
- building the experiment's live objects (testbed/build.py).
"""
from testbed.build import build, initial_accuracy
from testbed.experiment import Experiment, Purpose, stream
from testbed.scenario_file import apply_overrides, read_yaml, set_path, yaml_value
from testbed.schema.errors import describe
from testbed.schema.scenario import Scenario
from testbed.validation import load, validate

__all__ = ["Experiment", "Purpose", "Scenario", "apply_overrides", "build", "describe", "initial_accuracy", "load",
           "read_yaml", "set_path", "stream", "validate", "yaml_value"]
