"""Planted bugs against the old (0d0462e) and new checks of chapter 10 cells 5(d), 14, 16.

Run from the repository root: PYTHONPATH=. .venv/bin/python scripts/planted_bugs_ch10.py
(the old checks are read from commit 0d0462e, before the rewrite; the new from the working tree)."""
import copy, subprocess, json, math, sys
import nbformat, torch
from posenc_lib import scaling, temperature

def cells(source_nb):
    nb = nbformat.reads(source_nb, as_version=4)
    return {c.get("id"): c.source for c in nb.cells}

old = cells(subprocess.run(["git", "show", "0d0462e:book/10_beyond.ipynb"], capture_output=True, text=True, check=True).stdout)
new = cells(open("book/10_beyond.ipynb").read())
setup = new["b10-imports"] if "b10-imports" in new else None
nb = nbformat.read("book/10_beyond.ipynb", as_version=4)
setup = nb.cells[1].source
base = {}
exec(compile(setup.replace("%", "#"), "setup", "exec"), base)

def part_d(src):
    return src[src.index("# (d)"):src.index("print(")]

def run(label, code, ns, patch=None):
    env = dict(ns)
    undo = []
    if patch:
        for obj, name, fn in patch:
            undo.append((obj, name, getattr(obj, name)))
            setattr(obj, name, fn)
    try:
        exec(compile(code, label, "exec"), env)
        result = "passes"
    except AssertionError:
        result = "FAILS (AssertionError)"
    finally:
        for obj, name, fn in undo:
            setattr(obj, name, fn)
    print(f"  {label:<34} {result}")
    return env

# cell 5 (d)
ns5 = dict(base, d_l=128, train_l=4096)
real_rot = scaling.rotations
double_turns = (scaling, "rotations", lambda f, length: 2 * real_rot(f, length))
print("cell 5 (d), planted bug: scaling.rotations returns twice the turns")
run("old (d)", part_d(old["b10-liu-check"]), ns5, [double_turns])
run("new (d)", part_d(new["b10-liu-check"]), ns5, [double_turns])
print("cell 5 (d), no bug")
run("old (d)", part_d(old["b10-liu-check"]), ns5)
run("new (d)", part_d(new["b10-liu-check"]), ns5)

# cell 14
real_h = temperature.attention_entropy
minus = lambda nats: (temperature, "attention_entropy", lambda s, **k: real_h(s, **k) - nats)
for nats in (1.0, 4.0):
    print(f"cell 14, planted bug: attention_entropy returns H - {nats} nats")
    run("old", old["b10-dilution-check"], base, [minus(nats)])
    run("new", new["b10-dilution-check"], base, [minus(nats)])
print("cell 14, no bug")
run("old", old["b10-dilution-check"], base)
ns14 = run("new", new["b10-dilution-check"], base)

# cell 16
print("cell 16, planted bug: the plain weight taken after the log-n scale")
real_softmax = torch.softmax
calls = {"n": 0}
def plain_scaled(x, dim):
    # the second softmax of each N in both cells is the plain one: scale it too
    calls["n"] += 1
    if calls["n"] % 2 == 0:
        n = x.shape[-1]
        return real_softmax(temperature.logn_attention_scale(n - 1, 512) * x, dim)
    return real_softmax(x, dim)
for label, src in (("old", old["b10-logn-check"]), ("new", new["b10-logn-check"])):
    calls["n"] = 0
    run(label, src, ns14, [(torch, "softmax", plain_scaled)])
print("cell 16, planted bug: the proposition's bound e^B/N for e^{2B}/N")
run("old", old["b10-logn-check"].replace("torch.exp(2 * logits", "torch.exp(1 * logits"), ns14)
run("new", new["b10-logn-check"].replace("math.exp(2 * b_small)", "math.exp(b_small)"), ns14)
print("cell 16, no bug")
run("old", old["b10-logn-check"], ns14)
run("new", new["b10-logn-check"], ns14)
print("cell 14, H - 1 nat, new check without its exact comparison (the bounds alone)")
bounds_only = new["b10-dilution-check"].replace(
    "    assert abs(h - exact) <= 8 * n_keys * eps64 * math.log(n_keys)\n", "").replace(
    "math.log(n_keys) - math.log(2) <= exact <= math.log(n_keys)",
    "math.log(n_keys) - math.log(2) <= h <= math.log(n_keys)")
assert bounds_only != new["b10-dilution-check"]
run("new, bounds only", bounds_only, base, [minus(1.0)])
print("numbers (no bug):")
env = run("new cell 16", new["b10-logn-check"], ns14)
