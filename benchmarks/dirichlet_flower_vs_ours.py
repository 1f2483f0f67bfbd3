"""Flower's DirichletPartitioner against the testbed's `kind: dirichlet` on the bundled MNIST-5k (4,000 training
digits, 10 classes), alpha 0.5, 100 devices, as a scenario's build() calls each (the partition stream of seeds
0-19): partition sizes, classes per device, FedDUMAP's non-IID degree (mean JS divergence, bits), and how often
Flower redrew (its warning: min_partition_size not met). Writes docs/data_hub/dirichlet.md (the table) and docs/data_hub/dirichlet.png (the
label distributions of the first 20 devices under seed 0). Needs the hf extra.

    python benchmarks/dirichlet_flower_vs_ours.py
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from testbed.build import Purpose, stream
from testbed.data.flower_partition import partition as flower
from testbed.data.mnist5k import load_mnist5k
from testbed.data.partition import dirichlet, label_histograms, non_iid_degree

ALPHA, DEVICES, SEEDS = 0.5, 100, range(20)
OUT = Path(__file__).resolve().parent.parent / "docs" / "data_hub"




def ours(labels, seed, min_samples=1):
    rng = np.random.default_rng(stream(seed, Purpose.PARTITION))
    return dirichlet(labels, DEVICES, rng, ALPHA, min_samples=min_samples), 0


def flowers(labels, seed, **options):
    """Flower's partition and how many times it redrew (it warns once a redraw)."""
    rng = np.random.default_rng(stream(seed, Purpose.PARTITION))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parts = flower(labels, DEVICES, rng, "DirichletPartitioner",
                       {"alpha": ALPHA, "partition_by": "label", **options})
    return parts, sum("min_partition_size" in str(w.message) for w in caught)


VARIANTS = {
    "ours (`kind: dirichlet`, min_samples_per_client 1)": lambda y, s: ours(y, s),
    "ours, min_samples_per_client 10": lambda y, s: ours(y, s, 10),
    "Flower DirichletPartitioner (defaults: min_partition_size 10)": lambda y, s: flowers(y, s),
    "Flower, self_balancing: true": lambda y, s: flowers(y, s, self_balancing=True),
}


def measure(labels: np.ndarray) -> tuple[list[str], dict]:
    rows, first = [], {}
    for name, run in VARIANTS.items():
        sizes, classes, degrees, redraws = [], [], [], []
        for seed in SEEDS:
            parts, redrawn = run(labels, seed)
            redraws.append(redrawn)
            hist = label_histograms(labels, parts, 10)
            sizes.append([len(p) for p in parts])
            classes.append((hist > 0).sum(axis=1).mean())
            degrees.append(non_iid_degree(hist)[1])
            if seed == 0:
                first[name] = hist
        sizes = np.array(sizes)
        rows.append(f"| {name} | {np.mean(degrees):.3f} ({np.min(degrees):.3f}-{np.max(degrees):.3f}) | "
                    f"{np.mean(classes):.2f} | {sizes.min()} | {np.median(sizes):.0f} | {sizes.max()} | "
                    f"{sizes.std(axis=1).mean():.1f} | {sum(r > 0 for r in redraws) if 'Flower' in name else '-'} |")
    return rows, first


def figure(first: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in first if "min_samples_per_client 1)" in n or "defaults" in n]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, name in zip(axes, names):
        hist = first[name][:20]
        bottom = np.zeros(len(hist))
        for c in range(hist.shape[1]):
            ax.bar(np.arange(len(hist)), hist[:, c], bottom=bottom, color=plt.cm.tab10(c), width=0.85)
            bottom += hist[:, c]
        ax.set_title(name.split(" (")[0] if "ours" in name else "Flower DirichletPartitioner", fontsize=9)
        ax.set_xlabel("device (first 20 of 100), seed 0")
    axes[0].set_ylabel("samples per class")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main() -> None:
    dataset = load_mnist5k()
    labels = dataset.train_y.numpy()
    rows, first = measure(labels)
    header = ["| partition (alpha 0.5, 100 devices, MNIST-5k's 4,000 training digits) | non-IID degree, mean over "
              "seeds 0-19 (range) | classes per device | smallest | median | largest | std of sizes | seeds redrawn "
              "(Flower) |", "|---|---|---|---|---|---|---|---|"]
    table = "\n".join(header + rows)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "dirichlet.md").write_text(table + "\n")
    figure(first, OUT / "dirichlet.png")
    print(table)


if __name__ == "__main__":
    main()
