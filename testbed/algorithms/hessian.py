"""The Hessian's spectral density by stochastic Lanczos quadrature, and FedAP's pruning rate from its gap.

Lanczos (Golub and Meurant; PyHessian's `density(iter=m, n_v=1)`, Yao et al. 2020): from one Rademacher vector
v, m steps of Lanczos with full reorthogonalization on Hessian-vector products give a tridiagonal T whose
eigenvalues (Ritz values) are the quadrature nodes and the squared first components of its eigenvectors the
weights: together a discrete spectral density of the Hessian, the weights summing to 1.

FedDUMAP's rate (specs/feddumap.md §3a, from IMC's eigen-gap criterion as the authors' code runs it): scan a
threshold t up from 0 in steps of `inc`, with ratio(t) = 1 - CDF(t) the mass above t; stop when `patience`
successive changes are each below `tol`, and take that ratio; if ratio falls below half of ratio(0) first,
halve inc and scan again. Deviation: PyHessian smooths the nodes with Gaussians of variance 1e-5 before the CDF;
we read the CDF off the nodes themselves (a step function), which the smoothing changes by less than its width.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from testbed.functional import Params

HVP_FORWARDS = 6  # a Hessian-vector product by double backward costs about two gradients, a gradient 3 forwards


def hessian_vector_product(loss_of: Callable[[Params], torch.Tensor], params: Params) -> Callable[[Params], Params]:
    """v -> H v at `params`, H the Hessian of loss_of (Pearlmutter's trick: the gradient of g . v)."""
    leaves = {n: p.detach().requires_grad_() for n, p in params.items()}
    grads = torch.autograd.grad(loss_of(leaves), list(leaves.values()), create_graph=True)

    def hvp(v: Params) -> Params:
        dot = sum((g * v[n]).sum() for g, n in zip(grads, leaves))
        return dict(zip(leaves, (h.detach() for h in torch.autograd.grad(dot, list(leaves.values()),
                                                                          retain_graph=True))))

    return hvp


def lanczos_density(hvp: Callable[[Params], Params], like: Params, steps: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(Ritz values ascending, their weights) of `steps` Lanczos iterations from a Rademacher vector drawn with
    `rng` (fewer when the Krylov space closes early)."""
    names = list(like)
    sizes = [like[n].numel() for n in names]
    flat = lambda v: torch.cat([v[n].reshape(-1) for n in names]).double()  # noqa: E731
    unflat = lambda x: {n: t.reshape(like[n].shape).to(like[n].dtype)  # noqa: E731
                        for n, t in zip(names, torch.split(x, sizes))}
    v = torch.from_numpy(rng.choice([-1.0, 1.0], size=sum(sizes)))
    basis = [v / v.norm()]
    alphas, betas = [], []
    for i in range(steps):
        w = flat(hvp(unflat(basis[-1])))
        alphas.append(float(w @ basis[-1]))
        for q in basis:  # full reorthogonalization, as PyHessian does
            w = w - (w @ q) * q
        beta = float(w.norm())
        if i == steps - 1 or beta < 1e-10:
            break
        betas.append(beta)
        basis.append(w / beta)
    tridiagonal = np.diag(alphas) + np.diag(betas, 1) + np.diag(betas, -1)
    values, vectors = np.linalg.eigh(tridiagonal)
    return values, vectors[0] ** 2


def gap_rate(values: np.ndarray, weights: np.ndarray, inc: float = 0.1, tol: float = 0.005, patience: int = 3,
             max_halvings: int = 30) -> float:
    """FedDUMAP's pruning rate p*_k from a spectral density: the plateau of 1 - CDF(t) scanned up from t = 0."""
    ratio = lambda t: float(weights[values > t].sum())  # noqa: E731
    start = ratio(0.0)
    top = float(values.max())
    for _ in range(max_halvings):
        t, last, calm = 0.0, start, 0
        while t <= top:
            t += inc
            now = ratio(t)
            if now < start / 2:
                break
            calm = calm + 1 if abs(last - now) < tol else 0
            if calm == patience:
                return now
            last = now
        else:
            return last  # scanned past the largest eigenvalue: nothing more to drop
        inc /= 2
    return start
