"""Where a task's Phase and TaskPlan lived before testbed/clock.py: an asynchronous run's checkpoint written then
names this module, and resumes through it (testbed/safe_load.py looks the classes up by that name)."""
from testbed.clock import Phase, TaskPlan

__all__ = ["Phase", "TaskPlan"]
