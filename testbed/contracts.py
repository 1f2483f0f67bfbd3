"""Plugins' results checked where they cross into the testbed: a plugin that breaks its interface is named in
one line with the rule it broke, instead of failing later, deep inside the testbed, as if the testbed had a bug.

What is checked, where (each hook's contract: docs/extending.md):
- Strategy.init(params) and aggregate(...): a ServerState whose params have exactly the model's parameter names,
  each a dense tensor of the model's shape and dtype, on the server's device; aggregate returns the pair (state,
  metrics). Checked in the kit's server (init, and server.aggregate, which every protocol aggregates through).
- metrics (aggregate's; a device's Result.metrics): a dict of str -> real number. Aggregate's are also finite
  (train_loss aside: its NaN is a diverged model, stopping.py's check_finite, after the round's row is written),
  not named like rounds.csv's own columns, server_flops not negative, and "tables" {csv file name: rows} writes
  files of its own only (FedAP's pruning.csv), never the run's (testbed/columns.py's OWN_FILES).
- Strategy.configure(state, ctx, rng): a list of Task, each for a device among ctx.selected, no device twice,
  for this round, its sizes usable on the clock (samples positive integers, a ratio in (0, 1]: task_problem). An
  empty list is allowed in a synchronous round (a degenerate round: degenerate.py names the plugins); in an
  asynchronous dispatch every picked device needs its task (the slot is taken for it).
- Strategy.start(task, received): (params, optimizer state or None), params a dict of tensors (execution/common.py).
- Strategy.finish(...): a Result whose update holds, for each part of the task's uplink codec, each model
  parameter at its shape (what the codec encodes; checked in the kit's task work before encoding).
- Strategy.personal_models(state): a dict of device id -> params of the model's names and shapes (evaluation.py).
- Selector.select(state, ctx, rng): the pair (ids, state); integer ids, within the fleet, usable at that instant
  (ctx.usable_each), none twice, at most ctx.n_select (protocols/participation.py's select); in an asynchronous dispatch, at
  least one where some device could take a task (the free slots would otherwise wait at that instant for ever).
- Selector.select and observe: a state where they were given one (None is a forgotten `return state`); before a
  checkpoint keeps it, plain data (None, numbers, strings, numpy arrays, lists, tuples and dicts of them).
- A model factory's output, checked once before round 1 (build.py): float32 parameters; a forward pass on a batch
  of the training data that runs (a layer that does not fit the data's shape is the model's error) and gives
  finite logits (batch, num_classes, ...): fewer or more logits than the data has classes are both refused.
- A dataset loader's result: testbed/data/loading.py, before the run.
Who is checked: user plugins (a reference "package.module:attribute" or a short name an installed package
registers) always; the built-ins only in a run built with check_builtins (build(scenario, check_builtins=True),
which passes it to Contracts and check_model: the tests run every built-in through the checks): the checks are
shapes and keys, not values, but a built-in need not pay even that at 100,000 devices. start's pair (started) is
checked for every strategy, built-in or not: a few isinstance checks a job, where a worker process or a Ray
worker has no run's flag to read.
A failed check raises errors.PluginError for a user plugin (the command line: one line, exit 2; the rounds
already written are kept) and AssertionError for a built-in (a bug of the testbed, reported as one).
The checks read results only: they draw no random numbers and change nothing, so the tables are the same with
and without them.
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from testbed import plugins
from testbed.columns import OWN_FILES, RESERVED_METRICS
from testbed.errors import PluginError

def where(hook: Any) -> str:
    """' (file:line)' of a hook's code where Python knows it (a plain function or method); '' otherwise."""
    place = plugins.where(hook)
    return "" if place is None else f" ({place})"


class Plugin:
    """One plugin of a run: what the scenario calls it (`section` 'name'), the object, and whether it is checked
    (a user plugin, or a built-in where the run checks those too: check_builtins, a testbed bug's AssertionError
    where it fails); `fail` raises its broken rule."""

    def __init__(self, section: str, name: str, obj: Any, builtin: bool, check_builtins: bool = False):
        self.section, self.name, self.obj, self.builtin = section, name, obj, builtin
        self.checked = not builtin or check_builtins

    def named(self, hook: str) -> str:
        """`section` 'name'.hook (file:line); a factory or loader, which is its own hook: `section` 'name' (file:line)."""
        if not hook:
            return f"{self.section} '{self.name}'{where(self.obj)}"
        return f"{self.section} '{self.name}'.{hook}{where(getattr(self.obj, hook, None))}"

    def fail(self, hook: str, broke: str, fix: str, r: int | None = None):
        self.refuse(f"{'' if r is None else f'round {r}: '}{self.named(hook)} {broke}; {fix}")

    def refuse(self, message: str):
        raise (AssertionError(f"built-in {message}") if self.builtin else PluginError(message))


def _shape(shape) -> str:
    return f"({', '.join(map(str, shape))})" if len(shape) != 1 else f"({shape[0]},)"


def params_problem(params: Any, shapes: Mapping[str, torch.Size], dtypes: Mapping[str, torch.dtype] | None,
                   parts: tuple[str, ...] = ("",), optional: tuple[str, ...] = (),
                   device: torch.device | None = None) -> str | None:
    """What keeps `params` from being the model's parameters (names, each a dense tensor of its shape, of its dtype
    where `dtypes` are given and on the kind of `device` where given), once for each of a multi-part payload's
    `parts` ("m:conv.weight", payload.py; `optional` parts may be there too: a TopK codec's select_by scores);
    None where nothing does."""
    from testbed.payload import part_key

    if not isinstance(params, Mapping):
        return f"{type(params).__name__} instead of a dict of tensors by parameter name"
    keys = [(part_key(p, n), shape, n) for p in parts + optional for n, shape in shapes.items()]
    needed = len(parts) * len(shapes)
    missing = [key for key, _, _ in keys[:needed] if key not in params]
    if missing or len(params) > needed:
        allowed = {key for key, _, _ in keys}
        extra = [repr(n) for n in params if n not in allowed]
        if missing or extra:
            return "; ".join(said for said in (f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
                                               "missing" if missing else "",
                                               f"{', '.join(extra[:3])} not the model's" if extra else "") if said)
    for key, shape, name in keys:
        t = params.get(key)
        if t is None and key not in params:   # an optional part left out
            continue
        if not isinstance(t, torch.Tensor):
            return f"{key} is {type(t).__name__}, not a tensor"
        if t.layout != torch.strided:
            return f"{key} is a {str(t.layout).removeprefix('torch.')} tensor, the model's are dense (strided)"
        if device is not None and t.device.type != device.type:
            return f"{key} is on {t.device}, the server's tensors are on {device}"
        if t.shape != shape:
            return f"{key} has shape {_shape(t.shape)}, the model's is {_shape(shape)}"
        if dtypes is not None and t.dtype != dtypes[name]:
            return f"{key} is {t.dtype}, the model's is {dtypes[name]}"
    return None


def task_problem(task: Any) -> str | None:
    """What keeps a Task's sizes from being usable on the clock: samples and samples processed positive integers,
    a ratio in (0, 1], forward FLOPs a positive integer where given; None where nothing does."""
    for field in ("num_samples", "samples_processed"):
        if not _positive_integer(getattr(task, field)):
            return f"{field} = {getattr(task, field)!r}, not a positive integer"
    if task.ratio is not None and not (isinstance(task.ratio, numbers.Real) and 0 < task.ratio <= 1):
        return f"ratio = {task.ratio!r}, not in (0, 1]"
    if task.forward_flops is not None and not _positive_integer(task.forward_flops):
        return f"forward_flops = {task.forward_flops!r}, not a positive integer"
    return None


def _positive_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def metrics_problem(metrics: Any, server: bool = False) -> str | None:
    """What keeps `metrics` from being a dict of str -> real number; `server`: aggregate's, whose "tables" are rows
    of csv files of their own (tables_problem), whose names are not rounds.csv's own columns, whose values are
    finite (train_loss aside: a NaN there is a diverged model, stopping.py's check_finite) and whose server_flops
    is not negative."""
    if not isinstance(metrics, dict):
        return f"metrics of type {type(metrics).__name__}, not a dict"
    reserved = RESERVED_METRICS if server else frozenset()
    for key, value in metrics.items():
        if key == "tables" and server:
            problem = tables_problem(value)
            if problem:
                return problem
            continue
        if key in reserved:
            return f"a metric named {key!r}, which is rounds.csv's own column; name it otherwise"
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            return f"metric {key!r} = {' '.join(repr(value).split())[:60]} ({type(value).__name__}), not a number"
        if server and key != "train_loss" and not math.isfinite(value):
            return f"metric {key!r} = {value}, not a finite number"
        if key == "server_flops" and value < 0:
            return f"metric 'server_flops' = {value}, a negative count of FLOPs"
    return None


def tables_problem(tables: Any) -> str | None:
    """What keeps metrics["tables"] from being {file name: rows}: each a .csv file name of its own in the run folder
    (none of the run's own files, no folder), its rows a list of dicts."""
    if not isinstance(tables, dict):
        return f"metrics['tables'] of type {type(tables).__name__}, not a dict of file name -> rows"
    for name, rows in tables.items():
        if not isinstance(name, str) or not name.endswith(".csv") or Path(name).name != name or name in OWN_FILES:
            why = "a run's own file" if name in OWN_FILES else "not a .csv file name in the run folder"
            return f"metrics['tables'] naming {name!r}, {why}"
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            return f"metrics['tables'][{name!r}] of type {type(rows).__name__}, not a list of rows (dicts)"
    return None


def _not_plain(value: Any) -> str | None:
    """What the first thing in `value` is that is not plain data (None, bool, numbers, strings, numpy
    arrays of numbers and numpy scalars, and lists, tuples and dicts of them); None where all is plain."""
    if value is None or isinstance(value, (bool, numbers.Number, str, np.generic)):
        return None
    if isinstance(value, np.ndarray):
        return None if value.dtype.kind in "biufc" else f"a numpy array of dtype {value.dtype}"
    if isinstance(value, (list, tuple)):
        return next((odd for v in value if (odd := _not_plain(v)) is not None), None)
    if isinstance(value, dict):
        return next((odd for k, v in value.items() if (odd := _not_plain(k) or _not_plain(v)) is not None), None)
    return f"a value of type {type(value).__name__}"


class Contracts:
    """The checks of one run's strategy and selector, against its model's parameters (`params`: name -> tensor),
    the server's `device` and its fleet of `n` devices; the built-in ones too where check_builtins."""

    def __init__(self, scenario, strategy, selector, params: Mapping[str, torch.Tensor], n: int,
                 device: torch.device | None = None, check_builtins: bool = False):
        from testbed.schema.algorithms import BUILTIN
        from testbed.selection import SELECTORS

        self.strategy = Plugin("algorithm", scenario.algorithm.name, strategy, scenario.algorithm.name in BUILTIN,
                               check_builtins)
        self.selector = Plugin("selection", scenario.selection.name, selector, scenario.selection.name in SELECTORS,
                               check_builtins)
        self.shapes = {name: p.shape for name, p in params.items()}
        self.dtypes = {name: p.dtype for name, p in params.items()}
        self.device = device   # where the server's tensors live (execution/placement.py); None: not checked
        self.n = n
        self.asynchronous = scenario.protocol.kind == "async"
        self.no_task: list[str] = []   # which plugin handed out no task in a round (degenerate.py words it)

    # ---- the strategy's server side --------------------------------------------------------------------
    def state(self, state: Any, hook: str, r: int | None = None) -> Any:
        """init's or aggregate's ServerState, checked."""
        from testbed.algorithms.base import ServerState

        if not self.strategy.checked:
            return state
        fix = "return a ServerState whose params are the model's, name for name (docs/extending.md)"
        if not isinstance(state, ServerState):
            self.strategy.fail(hook, f"returned {type(state).__name__} where a ServerState was due", fix, r)
        problem = params_problem(state.params, self.shapes, self.dtypes, device=self.device)
        if problem:
            self.strategy.fail(hook, f"returned a state whose params do not fit the model: {problem}", fix, r)
        return state

    def aggregated(self, result: Any, r: int) -> tuple[Any, dict]:
        """aggregate's (state, metrics), checked."""
        if not self.strategy.checked:
            return result
        if not (isinstance(result, tuple) and len(result) == 2):
            what = type(result).__name__ if not isinstance(result, tuple) else f"a tuple of {len(result)}"
            self.strategy.fail("aggregate", f"returned {what} where (state, metrics) was due",
                               "return the pair (ServerState, dict of metrics)", r)
        state, metrics = result
        problem = metrics_problem(metrics, server=True)
        if problem:
            self.strategy.fail("aggregate", f"returned {problem}",
                               "return metrics as a dict of name -> number (e.g. {'train_loss': 0.3})", r)
        return self.state(state, "aggregate", r), metrics

    def tasks(self, tasks: Any, ctx) -> list:
        """configure's tasks for the devices ctx.selected, checked; a round with none is remembered (no_task)."""
        from testbed.algorithms.base import Task

        if self.strategy.checked:
            r = ctx.round
            if not isinstance(tasks, list) or not all(isinstance(t, Task) for t in tasks):
                what = type(tasks).__name__ if not isinstance(tasks, list) else \
                    f"a list holding {next(type(t).__name__ for t in tasks if not isinstance(t, Task))}"
                self.strategy.fail("configure", f"returned {what} where a list of Task was due",
                                   "return [task_for(d, ctx, ...) for d in ctx.selected]", r)
            devices = [t.device for t in tasks]
            picked = set(ctx.selected.tolist())
            stray = [d for d in devices if d not in picked]
            twice = len(set(devices)) != len(devices)
            if stray or twice:
                self.strategy.fail("configure", f"returned a task for device {stray[0]}, which the selection did "
                                   f"not pick" if stray else "returned two tasks for one device",
                                   "give one task to each device of ctx.selected", r)
            if any(t.round != r for t in tasks):
                self.strategy.fail("configure", f"returned a task of round {next(t.round for t in tasks if t.round != r)}",
                                   "set each task's round to ctx.round (task_for does)", r)
            odd = next(((t, problem) for t in tasks if (problem := task_problem(t)) is not None), None)
            if odd is not None:
                self.strategy.fail("configure", f"returned device {odd[0].device}'s task with {odd[1]}",
                                   "build tasks with task_for(d, ctx, ...), which fills them from the device's data", r)
            if self.asynchronous and len(tasks) != len(picked):
                self.strategy.fail("configure", f"returned {len(tasks)} tasks for {len(picked)} picked devices in "
                                   "an asynchronous dispatch", "give one task to each device of ctx.selected", r)
        if not tasks and len(ctx.selected) and self.strategy.named("configure") not in self.no_task:
            self.no_task.append(self.strategy.named("configure"))
        return tasks

    # ---- the selector --------------------------------------------------------------------------------------
    def selected(self, result: Any, before: Any, ctx) -> tuple[np.ndarray, Any]:
        """select's (ids, state), checked: the pair, the ids as `picked` checks them, a state where one was given
        (`before`)."""
        plugin = self.selector
        if plugin.checked and not (isinstance(result, tuple) and len(result) == 2):
            what = type(result).__name__ if not isinstance(result, tuple) else f"a tuple of {len(result)}"
            plugin.fail("select", f"returned {what} where (ids, state) was due",
                        "return the ids and the state, as select(state, ctx, rng) -> (ids, state) "
                        "(docs/extending.md)", ctx.round)
        answer, state = result
        return self.picked(answer, ctx), self.observed(state, before, ctx.round, "select")

    def observed(self, state: Any, before: Any, r: int, hook: str = "observe") -> Any:
        """The selector's state as a hook returned it, checked: None where it was given one is a forgotten
        `return state` (the state would be lost without a word)."""
        if self.selector.checked and state is None and before is not None:
            self.selector.fail(hook, "returned None where its state was due",
                               "return the state it was given, or the next one (docs/extending.md)", r)
        return state

    def checkpointable(self, state: Any) -> Any:
        """The selector's state before a checkpoint keeps it, checked: plain data, which a checkpoint reads back
        without running code from it (testbed/safe_load.py); the built-ins' dataclasses are the testbed's own."""
        if self.selector.checked:
            odd = _not_plain(state)
            if odd is not None:
                self.selector.refuse(f"selection '{self.selector.name}': its state holds {odd}, which a "
                                     "checkpoint cannot keep; keep it as None, numbers, strings, numpy arrays, and "
                                     "lists, tuples and dicts of them (docs/extending.md)")
        return state

    def picked(self, answer: Any, ctx) -> np.ndarray:
        """select's answer as increasing int64 ids, checked; a pick of none among candidates is remembered."""
        r, plugin = ctx.round, self.selector
        if plugin.checked:
            exact = np.asarray(answer)
            if exact.ndim != 1 or (exact.dtype.kind not in "iu" and exact.size):
                plugin.fail("select", f"returned {type(answer).__name__} of {exact.dtype} {_shape(exact.shape)}",
                            "return a 1-d array of integer ids among ctx.candidates", r)
        picked = np.array(answer, dtype=np.int64)   # a copy: the run never holds the selector's own array
        if len(picked) > 1:   # (most asynchronous dispatches pick one: no sort, no repeat to look for)
            picked.sort()
        if plugin.checked and len(picked):
            if picked[0] < 0 or picked[-1] >= self.n:
                bad = picked[0] if picked[0] < 0 else picked[-1]
                plugin.fail("select", f"returned device {bad}, outside the fleet of {self.n} (ids 0..{self.n - 1})",
                            "return ids among ctx.candidates", r)
            offline = picked[~ctx.usable_each(picked)]
            if len(offline):
                plugin.fail("select", f"returned device {offline[0]}, which cannot take a task at {ctx.now:g} s "
                            "(offline, busy, or kept out by memory or battery)",
                            "return ids among ctx.candidates (or those ctx.usable says yes to)", r)
        if len(picked) > ctx.n_select or (len(picked) > 1 and (picked[1:] == picked[:-1]).any()):   # a run needs it
            plugin.refuse(f"round {r}: selection: '{plugin.name}' picked {len(picked)} devices "
                          f"({len(np.unique(picked))} distinct) where {ctx.n_select} distinct were asked for; fix its "
                          f"select{where(plugin.obj.select)}: return distinct ids, at most ctx.n_select")
        if plugin.checked and self.asynchronous and not len(picked) and ctx.usable_each(np.arange(self.n)).any():
            # the free slots would wait at this instant for a pick that never comes: the run would hang
            plugin.fail("select", "returned no device for an asynchronous dispatch while some could take a task",
                        "return at least one id where ctx.candidates is not empty", r)
        if not len(picked) and plugin.named("select") not in self.no_task:
            self.no_task.append(plugin.named("select"))
        return picked

    # ---- a device's results --------------------------------------------------------------------------------
    def results(self, results: list, tasks: list) -> None:
        """finish's Results of these tasks, checked: an update holding each part of its uplink codec, each model
        parameter at its shape, and numeric metrics."""
        if not self.strategy.checked:
            return
        from testbed.algorithms.base import Result

        for result, task in zip(results, tasks):
            fix = "return Result(update, metrics) with an update of the model's names and shapes"
            if not isinstance(result, Result):
                self.strategy.fail("finish", f"returned {type(result).__name__} where a Result was due", fix,
                                   task.round)
            codec = result.up or task.up
            parts = getattr(codec, "parts", ("",))   # a submodel's UnitMasked payload: the plain names
            scores = getattr(codec, "select_by", None)
            problem = params_problem(result.update, self.shapes, None, parts,
                                     (scores,) if scores is not None and scores not in parts else ())
            if problem:
                self.strategy.fail("finish", f"returned an update of device {task.device} that does not fit the "
                                   f"model: {problem}", fix, task.round)
            problem = metrics_problem(result.metrics)
            if problem:
                self.strategy.fail("finish", f"returned {problem}", fix, task.round)

    def personal(self, models: Any) -> Any:
        """personal_models' dict of device id -> params, checked."""
        if not self.strategy.checked:
            return models
        fix = "return {device id: params of the model's names and shapes}"
        if not isinstance(models, dict):
            self.strategy.fail("personal_models", f"returned {type(models).__name__}, not a dict", fix)
        for d, params in models.items():
            if not isinstance(d, numbers.Integral) or not 0 <= d < self.n:
                self.strategy.fail("personal_models", f"returned a model for {d!r}, not a device id", fix)
            problem = params_problem(params, self.shapes, None)
            if problem:
                self.strategy.fail("personal_models", f"returned device {d}'s model that does not fit: {problem}",
                                   fix)
        return models


def started(strategy: Any, start: Any) -> Any:
    """start's (params, optimizer state or None), checked for every strategy (execution/common.py, in whichever
    process trains the job): a tuple check and an isinstance a parameter tensor, about 4 us a job for ten tensors
    and 13 us for a hundred (timeit, one 2-core CPU), against milliseconds of training."""
    if not (isinstance(start, tuple) and len(start) == 2 and isinstance(start[0], Mapping)
            and all(isinstance(t, torch.Tensor) for t in start[0].values())):
        module = type(strategy).__module__
        plugin = Plugin("algorithm", f"{module}:{type(strategy).__qualname__}", strategy,
                        module.partition(".")[0] == "testbed")
        plugin.fail("start", f"returned {type(start).__name__} where (params, optimizer state or None) was due",
                    "return the dict of tensors to train from and None (or the optimizer's state)")
    return start


def check_model(name: str, model: torch.nn.Module, batch: torch.Tensor, num_classes: int,
                check_builtins: bool = False) -> None:
    """The output of model.name's model on one batch of the data: (batch, num_classes, ...) logits, fewer or more
    refused; a zoo model's only where check_builtins. Run in eval mode with no gradient (no batch-norm statistics
    move, no dropout draws), the mode put back: the run is unchanged."""
    from testbed.names import MODELS

    builtin = name in MODELS
    if builtin and not check_builtins:
        return
    factory = plugins.resolve("model", MODELS, name)
    plugin = Plugin("model", name, factory, builtin, check_builtins)
    odd = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters() if p.dtype != torch.float32})
    if odd:
        plugin.fail("", f"made a model with {', '.join(odd)} parameters where the testbed trains float32",
                    "build it in float32 (torch's default; model.float() converts one)")
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(batch)
    except Exception as err:  # noqa: BLE001 - a layer that does not fit the data: the model's, in one line
        plugin.fail("", f"made a model that cannot take the data: on a batch of shape {_shape(batch.shape)} "
                    f"({str(batch.dtype).removeprefix('torch.')}) its forward pass raised {type(err).__name__}: "
                    f"{' '.join(str(err).split())}", f"make it take samples of shape {_shape(batch.shape[1:])}")
    finally:
        model.train(training)
    fix = f"make its last layer give num_classes ({num_classes}) outputs"
    if not isinstance(out, torch.Tensor):
        plugin.fail("", f"made a model whose output is {type(out).__name__}, not a tensor of logits", fix)
    if out.ndim < 2 or out.shape[0] != len(batch) or out.shape[1] != num_classes:
        got = f"{out.shape[1]} logits a sample" if out.ndim >= 2 else f"outputs of shape {_shape(out.shape)}"
        plugin.fail("", f"made a model that gives {got} where the data has {num_classes} classes "
                    f"(output {_shape(out.shape)} for a batch of {len(batch)})", fix)
    if not torch.isfinite(out).all():
        plugin.fail("", "made a model whose output on a batch of the data is not finite (NaN or inf)",
                    "check its layers' initialisation and what its forward pass divides by")
