"""FedAP's pruning, done once (Liu et al., FedDUMAP, TIST, Alg. 3; specs/feddumap.md §3): the steps after each
participant's rate p*_k (testbed/algorithms/hessian.py).

    p* = sum_k w_k p*_k,   w_k = [n_k / (D(P_k) + eps)] / sum_k' [n_k' / (D(P_k') + eps)]        (Eq. 15)
    V  = |v| of the floor(R p*)-th smallest of all R parameters of the global model
    p*_l = #{|v| < V in conv layer l} / q_l                                                   (per-layer rate)
and in each conv layer the d_l - floor(p*_l d_l) filters of highest HRank rank (Lin et al., CVPR'20: the mean
matrix rank of the filter's feature maps on the server data) are kept. The rest are removed with everything that
reads them (testbed/submodel.structure): the model a device trains afterwards is the shrunk one.
Deviations: the rank is taken of ReLU(conv output), which is the ReLU's output that the authors hook for our
conv-ReLU models (and not, for a conv-norm-ReLU model, the normalized map). Only conv layers are pruned, as the
paper does; a model without convs keeps its shape. IMC (Zhang et al. 2021) prunes the same global magnitude
threshold unstructured: a mask over every parameter.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from testbed.functional import Params
EPS = 1e-12


def aggregate_rate(rates: np.ndarray, samples: np.ndarray, degrees: np.ndarray) -> float:
    """Eq. 15: the participants' rates weighted by n_k / (D(P_k) + eps), normalized."""
    weights = np.asarray(samples, dtype=np.float64) / (np.asarray(degrees, dtype=np.float64) + EPS)
    return float(np.dot(weights / weights.sum(), rates))


def magnitude_threshold(params: Params, rate: float) -> float:
    """V: the magnitude of the floor(R rate)-th smallest of all R parameter entries (-inf when that is none)."""
    magnitudes = torch.cat([p.detach().abs().reshape(-1) for p in params.values()])
    k = int(np.floor(len(magnitudes) * rate))
    return float(torch.kthvalue(magnitudes, k).values) if k >= 1 else -float("inf")


def layer_rates(params: Params, conv_weights: list[str], threshold: float) -> dict[str, float]:
    """p*_l: the share of each conv weight's entries below the threshold."""
    return {n: float((params[n].abs() < threshold).double().mean()) for n in conv_weights}


def conv_weights(model: nn.Module) -> list[str]:
    """Names of the conv layers' weights, the only ones FedAP prunes."""
    return [f"{name}.weight" for name, m in model.named_modules() if isinstance(m, nn.modules.conv._ConvNd)]


@torch.no_grad()
def feature_ranks(model: nn.Module, params: Params, x: torch.Tensor, batch: int = 100) -> dict[str, torch.Tensor]:
    """HRank: per conv weight name, the (filters,) mean matrix rank over the samples of ReLU(its output maps)."""
    sums: dict[str, torch.Tensor] = {}
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, nn.modules.conv._ConvNd):
            def record(module, inputs, output, key=f"{name}.weight"):
                ranks = torch.linalg.matrix_rank(torch.relu(output).double()).sum(0)  # (filters,) summed over samples
                sums[key] = sums.get(key, 0) + ranks
            hooks.append(module.register_forward_hook(record))
    try:
        for start in range(0, len(x), batch):
            functional_call(model, params, (x[start:start + batch],))
    finally:
        for hook in hooks:
            hook.remove()
    return {name: total.double() / len(x) for name, total in sums.items()}


def keep_highest(ranks: dict[str, torch.Tensor], rates: dict[str, float]) -> dict[str, torch.Tensor]:
    """Per conv weight, a (filters,) bool mask keeping the d - floor(p d) highest-ranked (at least 1; ties go to
    the lower index)."""
    masks = {}
    for name, rank in ranks.items():
        d = len(rank)
        keep = max(d - int(np.floor(rates[name] * d)), 1)
        mask = torch.zeros(d, dtype=torch.bool)
        mask[torch.argsort(-rank, stable=True)[:keep]] = True
        masks[name] = mask
    return masks


def magnitude_masks(params: Params, threshold: float) -> Params:
    """IMC's unstructured masks: 1 where |v| >= V, 0 below."""
    return {n: (p.abs() >= threshold).to(p.dtype) for n, p in params.items()}
