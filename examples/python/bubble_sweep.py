"""Notebook-style example (README "From Python"): the bubble of three schedules at P = 8 as the
micro-batches M grow from 8 to 256, with one's own per-stage costs, through the `bubblebench`
module: no command lines, no JSON parsing. Cells are marked `# %%` (Jupyter, VS Code).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/bubble_sweep.py [OUT.png]
"""
# %% The sweep: one call per schedule, a dict per M (the keys of `bubblebench sim --format json`)
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import bubblebench as bb  # noqa: E402

P = 8
Ms = [8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]
costs = dict(t_f=1.0, t_b=1.0, t_w=1.0)  # per stage and micro-batch; 1F1B's backward is B + W
schedules = {"1f1b": 1, "interleaved": 2, "zb-v": 2}  # name -> chunks per rank (v)
rows = {name: bb.simulate(name, P=P, M=Ms, v=v, **costs) for name, v in schedules.items()}

# %% A table: the simulated bubble and, where a schedule has one, its closed form
print(f"{'M':>5}" + "".join(f"{name:>14}{'(form)':>9}" for name in rows))
for i, M in enumerate(Ms):
    cells = ""
    for name, rs in rows.items():
        r = rs[i]
        form = r["model"]["bubble_fraction"] if r["model"]["applies"] else float("nan")
        cells += f"{r['bubble_fraction']:>14.4f}{form:>9.4f}"
    print(f"{M:>5}" + cells)

# %% The plot: simulated bubble fraction vs M, the closed form as a line where it applies
fig, ax = plt.subplots(figsize=(7.5, 4.6))
for (name, rs), colour in zip(rows.items(), ["#1f77b4", "#d62728", "#2ca02c"]):
    ax.plot([r["M"] for r in rs], [r["bubble_fraction"] for r in rs], "o", color=colour,
            label=f"{name} (v={rs[0]['v']}), simulated")
    forms = [(r["M"], r["model"]["bubble_fraction"]) for r in rs if r["model"]["applies"]]
    if forms:
        ax.plot(*zip(*forms), "-", color=colour, alpha=0.6, label=f"{name}: closed form")
        print(f"{name}: bubble time {rs[0]['model']['formula']} ({rs[0]['model']['source']})")
ax.set_xscale("log", base=2)
ax.set_xticks(Ms)
ax.set_xticklabels([str(m) for m in Ms])
ax.minorticks_off()
ax.set_xlabel("micro-batches per step, M")
ax.set_ylabel("bubble fraction = idle / (P·T)")
ax.set_title(f"Single-step bubble at P = {P}, F = B = W = 1 per stage")
ax.set_ylim(bottom=0)
ax.grid(True, alpha=0.3)
ax.legend(fontsize=8.5)
fig.tight_layout()
out = sys.argv[1] if len(sys.argv) > 1 else "bubble_sweep.png"
fig.savefig(out, dpi=110)
print(f"wrote {out}")
