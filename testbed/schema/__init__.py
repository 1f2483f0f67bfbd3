"""Sections of the scenario schema that grew big enough for a file of their own (testbed/scenario.py holds the rest)."""
