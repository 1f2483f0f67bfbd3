"""The scenario's `selection:` section: who is given a task (testbed/selection/).

`selection: {name: oort, options: {alpha: 2}}`: a built-in rule's name, a short name an installed package
registers, or user code named "package.module:Class" (testbed/plugins.py), a subclass of
testbed.selection.Selector. `options` are its constructor's keyword arguments, checked here by name and annotated
type; the section is plain data and asks its class only, building nothing. What only a built selector answers
(whether its constructor refuses a value, needs_deadline, async_refusal) is asked where the composition root builds
it, testbed/validation.py's selector_of, which validation calls too: a refused value is still refused before the
run. Default: uniform.
A selector written for the older interface (select(ctx, rng) keeping its state on itself; bind, restore)
is refused in one line pointing to docs/extending.md (selection/base.py's older_interface).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from testbed import plugins
from testbed.schema.common import Strict
from testbed.schema.options import annotated_types, check_options, parameters

if TYPE_CHECKING:  # the rules import numpy: they are imported where a section is checked, not with the schema
    from testbed.selection import Selector


class Selection(Strict):
    name: str = "uniform"
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _a_selector_with_these_options(self):
        from testbed.selection import Selector, older_interface

        cls = self.selector_class()
        older = older_interface(cls) if isinstance(cls, type) and issubclass(cls, Selector) else None
        if older:   # refused, not adapted: its state would live on the instance, out of checkpoints
            raise plugins.BadReference(
                f"'{self.name}' is written for the older Selector interface ({older}), which kept state on the "
                "selector; port it to init(registry, rounds, clients_per_round) -> state, select(state, ctx, rng) "
                "-> (ids, state), observe(state, round, now, outcomes, history) -> state (docs/extending.md)")
        plugins.check_subclass(cls, Selector, self.name)
        check_options("selection", self.name, parameters(cls, set()), annotated_types(cls), self.options)
        return self

    def selector_class(self) -> type[Selector]:
        """The Selector class this section names, for class-level questions (ASYNC); the composition root builds
        it (testbed/validation.py's selector_of)."""
        from testbed.selection import SELECTORS

        return plugins.resolve("selector", SELECTORS, self.name)

    @property
    def uniform(self) -> bool:
        return self.name == "uniform"
