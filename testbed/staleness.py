"""Staleness weights s(tau) of an update computed on a model tau server versions old.

Xie, Koyejo and Gupta, "Asynchronous Federated Optimization" (FedAsync, arXiv:1903.03934, 2019), sec. 4:
    constant      s(tau) = 1
    polynomial    s_a(tau) = (tau + 1)^(-a)
    hinge         s_{a,b}(tau) = 1 if tau <= b, else 1 / (a (tau - b) + 1)
FedBuff (Nguyen et al., AISTATS 2022) scales each buffered delta by 1 / sqrt(1 + tau): polynomial with a = 0.5.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Constant:
    def __call__(self, tau: int) -> float:
        return 1.0


@dataclass(frozen=True)
class Polynomial:
    a: float = 0.5

    def __call__(self, tau: int) -> float:
        return (tau + 1.0) ** -self.a


@dataclass(frozen=True)
class Hinge:
    a: float
    b: int

    def __call__(self, tau: int) -> float:
        return 1.0 if tau <= self.b else 1.0 / (self.a * (tau - self.b) + 1.0)


KINDS = {"constant": Constant, "polynomial": Polynomial, "hinge": Hinge}   # by protocol.staleness.kind


def staleness_of(kind: str, **constants: float) -> Constant | Polynomial | Hinge:
    """The staleness function s(tau) of protocol.staleness: its kind's function with the section's constants."""
    return KINDS[kind](**constants)
