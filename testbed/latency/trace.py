"""The operations of one training step, as the machine runs them: every aten operation that a step dispatches.

A step is what a device runs per minibatch: the forward pass, the cross-entropy loss, the backward pass and the
local optimizer's update (LocalSGD's, or any object with `init(params)` and `step(params, grads, state)`). It is
traced once on fake tensors (torch's FakeTensorMode: shapes, dtypes and strides, no data, no arithmetic), so a
trace of VGG-16 at batch 32 costs a fraction of a second, and the ops are those the CPU would dispatch (an LSTM
is aten.mkldnn_rnn_layer there, as in a real step). Each op keeps what its cost depends on: its name (a grouped or
depthwise convolution's with the suffix `_grouped`: another kernel), its FLOPs (torch.utils.flop_counter's formulas,
two per multiply-add, a grouped convolution's weight gradient divided by its groups; recurrent layers below), the
bytes of the tensors it reads and writes, and its first two tensor inputs' shapes (a convolution's input and
weight, a matmul's operands).
"""
from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from devices.latency import GROUPED

SHAPE_DIMS = 4   # each of the two operand shapes is kept as this many dims (leading ones, padded with 1)


@dataclass(frozen=True)
class Op:
    """One dispatched aten operation: what its time depends on."""

    name: str                     # the overload packet, e.g. "convolution_backward"
    flops: int                    # two per multiply-add, as vendors count peak FLOP/s
    nbytes: int                   # bytes of the tensors read and written (each operand and output)
    shapes: tuple[int, ...]       # the first two tensor inputs' dims, SHAPE_DIMS each

    def features(self) -> tuple[float, ...]:
        """Where the op sits among the calibrated ones: log2 of its FLOPs, bytes and operand dims."""
        return (math.log2(1 + self.flops), math.log2(1 + self.nbytes)) + tuple(math.log2(d + 1) for d in self.shapes)


@dataclass(frozen=True)
class Step:
    """One training step as the clock sees it: its ops, the parameter tensors it updates (the functional call
    and the optimizer walk them in Python, a cost beside the ops'), and its forward's module calls (each runs
    Python around its ops: nn.Module's call, the layer's own forward)."""

    ops: tuple[Op, ...]
    tensors: int
    modules: int = 0


def at_batch(a: Step, batch_a: int, b: Step, batch_b: int, batch_size: int) -> Step | None:
    """The step at `batch_size` from the same network's steps at two other batch sizes: each op's FLOPs, bytes
    and operand dims are affine in the batch size (weights fixed, activations proportional), so a line through
    the two gives them exactly; None where the two steps do not dispatch the same ops, or a value would not
    come out a whole non-negative number."""
    if len(a.ops) != len(b.ops) or any(x.name != y.name for x, y in zip(a.ops, b.ops)) or batch_a == batch_b:
        return None

    def line(u: int, v: int) -> int | None:
        value, rest = divmod(u * (batch_b - batch_size) + v * (batch_size - batch_a), batch_b - batch_a)
        return value if rest == 0 and value >= 0 else None

    ops = []
    for x, y in zip(a.ops, b.ops):
        values = [line(x.flops, y.flops), line(x.nbytes, y.nbytes)] + [line(u, v) for u, v in zip(x.shapes, y.shapes)]
        if any(v is None for v in values):
            return None
        ops.append(Op(x.name, values[0], values[1], tuple(values[2:])))
    return Step(tuple(ops), a.tensors, a.modules)


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _recurrent_flops(args) -> int:
    """A fused recurrent layer (mkldnn_rnn_layer and its backward: input, then the weights W_ih, W_hh and the two
    biases, then the states): every (step, sample) multiplies its input and hidden state by W_ih and W_hh, one
    multiply-add per weight entry (testbed/flops.py counts the same). On a GPU, cuDNN's _cudnn_rnn runs every
    layer in one op, its weights in one list: the same count over all of them."""
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor):   # cuDNN's weight flattening (_cudnn_rnn_flatten_weight and its check)
        return 0
    steps_x_batch = x.numel() // max(1, x.shape[-1])
    weights = [t for t in _tensors(args[1:5]) if t.dim() == 2]   # cuDNN's _cudnn_rnn: every layer's, in one list
    return 2 * steps_x_batch * sum(t.numel() for t in weights)


_GROUPS_ARG = {torch.ops.aten.convolution: 8, torch.ops.aten.convolution_backward: 9}   # its place in the call


def _groups(packet, args) -> int:
    """A convolution's groups; 1 for any other op, or where the call does not pass them by position."""
    place = _GROUPS_ARG.get(packet)
    return args[place] if place is not None and len(args) > place else 1


def _grouped_backward_flops(formula, args, kwargs, out, groups: int) -> int:
    """torch's count of a grouped convolution's backward, its weight gradient's part divided by the groups: torch
    counts that part as if the convolution were dense (every output channel against every input channel), so a
    depthwise layer of C channels was charged C times its weight gradient's work. Arguments: grad_output, input,
    weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask."""
    total = int(formula(*args, **kwargs, out_val=out))
    if len(args) < 11 or not args[10][1]:   # no weight gradient: torch's count holds
        return total
    weight = int(formula(*args[:10], [False, True, False], out_val=out))
    return total - weight + weight // groups


def _flops(packet, args, kwargs, out) -> int:
    formula = flop_registry.get(packet)
    groups = _groups(packet, args)
    if formula is not None and packet is torch.ops.aten.convolution_backward and groups != 1:
        return _grouped_backward_flops(formula, args, kwargs, out, groups)
    if formula is not None:
        return int(formula(*args, **kwargs, out_val=out))
    name = packet.__name__
    if "rnn" in name or "lstm" in name or "gru" in name:
        return _recurrent_flops(args) * (2 if "backward" in name else 1)
    return 0


def _name(packet, args) -> str:
    """The op's name: its overload packet's, a grouped convolution's with GROUPED (another kernel, at another
    rate: a depthwise layer runs a fraction of a dense one's FLOP/s)."""
    return packet.__name__ + (GROUPED if _groups(packet, args) != 1 else "")


def op_of(func, args, kwargs, out) -> Op:
    """The Op record of one dispatched call (real or fake tensors alike: only metadata is read)."""
    packet = func.overloadpacket
    tensors = _tensors((args, kwargs))
    # every operand counted, a tensor passed twice twice: deduplicating by object was not deterministic (fake
    # tensors' caching hands one object to two arguments in one trace and two in the next)
    nbytes = sum(t.numel() * t.element_size() for t in tensors + _tensors(out))
    shapes: tuple[int, ...] = ()
    for t in (tensors + [torch.empty(0)] * 2)[:2]:
        dims = tuple(t.shape)[:SHAPE_DIMS]
        shapes += dims + (1,) * (SHAPE_DIMS - len(dims))
    return Op(_name(packet, args), _flops(packet, args, kwargs or {}, out), nbytes, shapes)


class Recorder(TorchDispatchMode):
    """Records every aten op dispatched under it (prim ops such as prim.device are bookkeeping, not work); with
    `clock` (a function of no argument returning seconds, after waiting for the device), also each op's own time
    inside the step, from its call to its return: an op timed where it runs, its operands as the step left them
    in cache."""

    def __init__(self, clock: Callable[[], float] | None = None):
        super().__init__()
        self.ops: list[Op] = []
        self.seconds: list[float] = []
        self.clock = clock

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.clock is None or func.namespace != "aten":
            out = func(*args, **kwargs)
        else:
            start = self.clock()
            out = func(*args, **kwargs)
            self.seconds.append(self.clock() - start)
        if func.namespace == "aten":
            self.ops.append(op_of(func, args, kwargs, out))
        return out


def _batch(sample: torch.Tensor, batch_size: int) -> torch.Tensor:
    shape = (batch_size, *sample.shape[1:])
    if sample.is_floating_point():
        return torch.randn(shape, dtype=sample.dtype)
    return torch.zeros(shape, dtype=sample.dtype)


def _targets(logits: torch.Tensor) -> torch.Tensor:
    """Class labels for cross-entropy of these logits (classes on dim 1, as testbed/functional.py's loss)."""
    return torch.zeros((logits.shape[0], *logits.shape[2:]), dtype=torch.long, device=logits.device)


def run_step(model: torch.nn.Module, params: dict, buffers: dict, x: torch.Tensor, optimizer, state):
    """One training step, functionally: forward, cross-entropy, gradients, the optimizer's update."""
    logits = torch.func.functional_call(model, params | buffers, (x,))
    loss = F.cross_entropy(logits, _targets(logits))
    grads = torch.autograd.grad(loss, list(params.values()))
    with torch.no_grad():
        return optimizer.step(params, dict(zip(params, grads)), state)


def default_optimizer():
    """Plain SGD, the default `client:` optimizer."""
    from testbed.local import LocalSGD
    return LocalSGD(lr=0.01)


def trace_step(model: torch.nn.Module, sample: torch.Tensor, batch_size: int, optimizer=None) -> Step:
    """The ops of one training step of `model` on a batch of `batch_size` inputs shaped like `sample` (one input
    with its batch dimension), on fake tensors: nothing is computed and the model is left as it was. The fake
    tensors are on the model's device, so a model on a GPU dispatches the GPU's ops (cuDNN's, say)."""
    optimizer = optimizer or default_optimizer()
    device = next(model.parameters(), torch.empty(0)).device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # fake tensors warn about ops without meta kernels they fall back on
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        params = {n: mode.from_tensor(p.detach()).requires_grad_(True) for n, p in model.named_parameters()}
        buffers = {n: mode.from_tensor(b) for n, b in model.named_buffers()}
        with mode:
            x = mode.from_tensor(_batch(sample, batch_size).to(device))
            state = optimizer.init({n: p.detach() for n, p in params.items()})
            recorder = Recorder()
            with recorder, _module_calls(model) as calls:
                run_step(model, params, buffers, x, optimizer, state)
    return Step(tuple(recorder.ops), len(params), len(calls))


@contextlib.contextmanager
def _module_calls(model: torch.nn.Module):
    """The modules of `model` called inside the block, one entry a call (a module called twice, twice)."""
    calls: list[torch.nn.Module] = []
    handles = [module.register_forward_pre_hook(lambda called, args: calls.append(called))
               for module in model.modules()]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()
