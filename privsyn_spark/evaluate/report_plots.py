"""The run report's plots (matplotlib, optional): each returns ``<figure>`` HTML with an inline PNG."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping
from typing import Any

import numpy as np


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(fig: Any, caption: str) -> str:
    return (f'<figure><img alt="{html.escape(caption)}" src="{_png(fig)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def histogram_plots(distributions: Mapping[str, Mapping]) -> list[str]:
    """One real-vs-synthetic bar chart per column (``<figure>`` HTML snippets)."""
    from matplotlib.figure import Figure

    out = []
    for name, dist in distributions.items():
        real, synth = np.asarray(dist["real"], float), np.asarray(dist["synthetic"], float)
        k = len(real)
        fig = Figure(figsize=(min(max(3.5, 0.22 * k + 1.5), 11), 2.8))
        ax = fig.add_subplot()
        x = np.arange(k)
        ax.bar(x - 0.2, real, 0.4, label="real")
        ax.bar(x + 0.2, synth, 0.4, label="synthetic")
        if k <= 60:
            ax.set_xticks(x, [str(s)[:14] for s in dist["labels"]], rotation=90, fontsize=7)
        ax.set_ylabel("share of rows")
        ax.set_title(name, fontsize=10)
        ax.legend(fontsize=7)
        out.append(_figure(fig, f"{name}: real vs synthetic"))
    return out


def heatmap_plot(matrix: Mapping) -> str:
    """The 2-way TVD matrix as a heat map (``<figure>`` HTML)."""
    from matplotlib.figure import Figure

    attrs = matrix["attrs"]
    values = np.array([[np.nan if v is None else v for v in row] for row in matrix["values"]], dtype=float)
    size = min(max(4.0, 0.35 * len(attrs) + 2), 14)
    fig = Figure(figsize=(size + 1, size))
    ax = fig.add_subplot()
    top = float(np.nanmax(values)) if np.isfinite(values).any() else 0.0
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=max(top, 0.01))
    ax.set_xticks(range(len(attrs)), attrs, rotation=90, fontsize=7)
    ax.set_yticks(range(len(attrs)), attrs, fontsize=7)
    fig.colorbar(image, ax=ax, label="TVD")
    return _figure(fig, "2-way marginals: total-variation distance, real vs synthetic")


def rounds_plot(rounds: list[Mapping]) -> str:
    """GUM's relative L1 error by round (``<figure>`` HTML)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3))
    ax = fig.add_subplot()
    ax.plot([r.get("round", i) for i, r in enumerate(rounds)], [float(r.get("l1_error") or 0.0) for r in rounds],
            marker="o")
    ax.set_xlabel("round")
    ax.set_ylabel("relative L1 error")
    return _figure(fig, "GUM error by round")


def budget_plot(ledger: list[Mapping]) -> str:
    """The budget split: rho per step (ledger names up to ``:``), as bars (``<figure>`` HTML)."""
    from matplotlib.figure import Figure

    steps: dict[str, float] = {}
    for entry in ledger:
        step = str(entry.get("name", "?")).split(":")[0]
        steps[step] = steps.get(step, 0.0) + float(entry.get("rho") or 0.0)
    total = sum(steps.values()) or 1.0
    fig = Figure(figsize=(5, 0.5 * len(steps) + 1))
    ax = fig.add_subplot()
    ax.barh(list(steps), list(steps.values()))
    for i, value in enumerate(steps.values()):
        ax.text(value, i, f" {value / total:.0%}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("rho (zCDP)")
    return _figure(fig, "Budget split: rho per step")


def value_plots(values: Mapping[str, Mapping]) -> list[str]:
    """Per numeric column, real vs synthetic value histograms (log scales where the column is skewed)."""
    from matplotlib.figure import Figure

    out = []
    for name, v in values.items():
        hist = v.get("histogram")
        if not hist:
            continue
        edges = np.asarray(hist["edges"], dtype=float)
        real, synth = (np.asarray(hist[k], dtype=float) for k in ("real", "synthetic"))
        real, synth = real / max(real.sum(), 1), synth / max(synth.sum(), 1)
        fig = Figure(figsize=(4.6, 2.8))
        ax = fig.add_subplot()
        ax.stairs(real, edges, label="real", linewidth=1.5)
        ax.stairs(synth, edges, label="synthetic", linewidth=1.5)
        skewed = max(real.max(initial=0), synth.max(initial=0)) > 0.5
        if skewed:
            ax.set_yscale("log")
        if hist.get("log_x") and edges[0] > 0:
            ax.set_xscale("log")
        ax.set_title(f"{name} (KS {v.get('ks') or 0:.3f})", fontsize=10)
        ax.set_ylabel("share of rows" + (" (log)" if skewed else ""))
        ax.legend(fontsize=7)
        out.append(_figure(fig, f"{name}: values, real vs synthetic"))
    return out
