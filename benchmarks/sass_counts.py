"""SASS instruction counts of the ndimage kernels (src/cuda/ndimage.cu, and with --source
src/cuda/ndimage_exact.cu scipy's arithmetic), per output.

Usage (no GPU needed; nvcc on PATH, cuobjdump from the ``nvidia-cuda-cuobjdump`` wheel or the
toolkit)::

    python benchmarks/sass_counts.py [--arch 90] [--cubin FILE] [--source src/cuda/ndimage.cu]

The source is compiled with setup.py's nvcc flags for one architecture (``-cubin
-arch=sm_90 -O3 -std=c++17 --expt-relaxed-constexpr -I src``), then ``cuobjdump -sass`` gives
each kernel's instructions and ``cuobjdump --dump-resource-usage`` its registers, stack and
local memory (spills show as LOCAL/STACK bytes).

How "instructions per output" is counted (a static estimate, not a measurement):

* A kernel is cut into phases at its barriers (BAR.SYNC): the tiled kernels stage the input
  window in shared memory, then sum; the box kernels stage, sum along x, along y, then along z.
* A loop is the range from a backward branch's target to the branch.
* Staging phase: the first innermost loop holding a global load (LDG) and a shared store (STS)
  (the interior blocks' loop once there is one; the boundary-folding loop before) gives the
  instructions per staged element (its length / its STS); times the elements staged per
  output (a 36x12x12 window per 32x8x8 outputs: 2.53).
* Summing phases: the innermost loop with the most floating-point arithmetic
  (FADD/FFMA/FMUL/DADD/DFMA/DMUL), or the whole phase when it has no such loop (fully
  unrolled), gives the instructions per floating-point operation; times the operations one
  output needs in that phase (MODEL below, for a 5x5x5 filter: 125 multiply-adds for a
  correlation; for a box 5 adds per row element along x and y spread over the block's outputs,
  and along z 5 per output for a direct sum, (5 + 2*7)/8 for a running one).
* Every instruction of a loop body or phase counts, taken or not: a body that folds
  coordinates for all five boundary modes counts all of them, a fallback never taken counts.
  Loop overhead outside the chosen loops is not counted.
* The staging phase's boundary-folding loop (blocks whose window crosses the input's edge),
  when it is another loop than the one counted, is shown apart as "(border n/1sts)".

Instructions that run once per block or thread outside these loops are not counted; the
total per kernel is printed apart.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

FP_OPS = re.compile(r"^(FADD|FFMA|FMUL|DADD|DFMA|DMUL|HADD2|HFMA2)\b")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRA = re.compile(r"BRA\s+(?:`?\(?\.?L_x_\d+\)?|0x([0-9a-f]+))")

# Geometry of the target: 5x5x5 weights, tile 32x8 threads x 8 outputs deep.
K = 5
TX, TY, TZ = 32, 8, 8
SX, SY, SZ = TX + K - 1, TY + K - 1, TZ + K - 1
OUT_PER_BLOCK = TX * TY * TZ
STAGED = SX * SY * SZ / OUT_PER_BLOCK  # window elements per output
BOX_X = SZ * SY * TX * K / OUT_PER_BLOCK  # adds per output, sums along x
BOX_Y = SZ * TY * TX * K / OUT_PER_BLOCK  # adds per output, sums along y
BOX_Z_DIRECT = float(K)
BOX_Z_RUNNING = (K + 2 * (TZ - 1)) / TZ

# kernel (demangled name pattern) -> floating-point operations per output of each phase for
# the 5x5x5 target (None marks a staging phase); the kernels that do not run it (other
# extents and depths) get totals, registers and spills only.  The running-sum kernel (long
# boxes along one axis) counts its loop per output: one add and one take-away.
MODEL: list[tuple[str, list[float | None]]] = [
    # the last template argument of the tiled and box kernels, when there is one, is the
    # boundary mode (-1: read at run time)
    (r"fp_cu_correlate(_const)?_kernel<\w+>", [K**3]),
    (r"fp_cu_tiled_kernel<\w+, 8, 5(, 5, 5|, 0, 0)?(, -?\d)?>", [None, K**3]),
    (r"fp_cu_box_kernel<\w+, 8, 5(, -?\d)?>", [None, BOX_X, BOX_Y, BOX_Z_RUNNING]),
    (r"fp_cu_box_kernel<\w+, 8(, 0)?(, -1)?>", [None, BOX_X, BOX_Y, BOX_Z_DIRECT]),
    (r"fp_cu_run_kernel<\w+>", [2.0]),
    # scipy's arithmetic (src/cuda/ndimage_exact.cu): a product and a sum per tap, in double;
    # a line's running sum, one sum and one difference per output (and its division)
    (r"fp_cx_point_kernel<\w+>", [2 * K**3]),
    (r"fp_cx_line_kernel<\w+>", [2.0]),
]


def tool(name: str) -> str:
    """Path of a CUDA binary: the pip wheel's (nvidia/cu13/bin) first, then PATH."""
    for site in sys.path:
        hits = glob.glob(os.path.join(site, "nvidia", "cu*", "bin", name))
        if hits:
            return hits[0]
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"{name} not found: pip install nvidia-cuda-{name.replace('cu', '', 1)}")
    return found


def compile_cubin(source: str, arch: str, out: str) -> None:
    """Compiles source into a cubin for sm_<arch> with setup.py's optimisation flags."""
    cmd = ["nvcc", "-cubin", f"-arch=sm_{arch}", "-O3", "-std=c++17", "--expt-relaxed-constexpr"]
    subprocess.run([*cmd, "-I", "src", "-o", out, source], check=True)


def parse_sass(text: str) -> dict[str, list[tuple[int, str]]]:
    """Kernel name -> [(address, instruction text)] from cuobjdump -sass output."""
    kernels: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] | None = None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = kernels.setdefault(m.group(1), [])
            continue
        m = INSN.search(line)
        if m and current is not None:
            current.append((int(m.group(1), 16), m.group(2).strip()))
    return kernels


def loops(insns: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(first index, last index) of each loop: a branch to an earlier address."""
    index = {addr: i for i, (addr, _) in enumerate(insns)}
    found = []
    for i, (addr, text) in enumerate(insns):
        m = re.search(r"BRA\s+(?:\S+,\s*)?0x([0-9a-f]+)", text)
        if m:
            target = int(m.group(1), 16)
            if target <= addr and target in index:
                found.append((index[target], i))
    return found


def opcode(text: str) -> str:
    """The opcode of an instruction, without its predicate."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0] if text else ""


def innermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The loops that hold no other loop."""
    return [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]


def body_stats(insns: list[tuple[int, str]], span: tuple[int, int]) -> tuple[int, int, int, int]:
    """(length, fp ops, global loads, shared stores) of insns[span]."""
    ops = [opcode(t) for _, t in insns[span[0] : span[1] + 1]]
    ops = [o for o in ops if o != "NOP"]
    fp = sum(1 for o in ops if FP_OPS.match(o))
    ldg = sum(1 for o in ops if o.startswith("LDG"))
    sts = sum(1 for o in ops if o.startswith("STS"))
    return len(ops), fp, ldg, sts


def per_output(name: str, insns: list[tuple[int, str]]) -> tuple[float | None, str]:
    """Estimated instructions per output of kernel name (demangled), and how it was found."""
    needs = next((v for k, v in MODEL if re.fullmatch(k, name)), None)
    if needs is None:
        return None, ""
    bars = [i for i, (_, t) in enumerate(insns) if opcode(t).startswith("BAR")]
    cuts = [0, *[b + 1 for b in bars], len(insns)]
    phases = [(cuts[i], cuts[i + 1] - 1) for i in range(len(cuts) - 1)]
    if len(phases) != len(needs):
        return None, f"{len(phases)} phases, model has {len(needs)}"
    inner = innermost(loops(insns))
    cost, how = 0.0, []
    for (lo, hi), need in zip(phases, needs):
        mine = [s for s in inner if lo <= s[0] and s[1] <= hi]
        if need is None:
            stage = [s for s in mine if body_stats(insns, s)[2] and body_stats(insns, s)[3]]
            span = min(stage, default=(lo, hi))
            n, _, _, sts = body_stats(insns, span)
            cost += n / max(sts, 1) * STAGED
            how.append(f"{n}/{sts}sts")
            border = max(stage, key=lambda s: body_stats(insns, s)[0], default=span)
            if border != span:  # the boundary blocks' folding loop, not in the estimate
                bn, _, _, bsts = body_stats(insns, border)
                how.append(f"(border {bn}/{bsts}sts)")
            continue
        hot = max(mine, key=lambda s: body_stats(insns, s)[1], default=None)
        if hot is None or body_stats(insns, hot)[1] == 0:
            hot = (lo, hi)
        n, fp, _, _ = body_stats(insns, hot)
        cost += n / max(fp, 1) * need
        how.append(f"{n}/{fp}fp")
    return cost, " ".join(how)


def resources(cubin: str) -> dict[str, str]:
    """Kernel name -> 'REG:n STACK:n LOCAL:n' from cuobjdump --dump-resource-usage."""
    out = subprocess.run(
        [tool("cuobjdump"), "--dump-resource-usage", cubin], capture_output=True, text=True
    ).stdout
    res: dict[str, str] = {}
    name = None
    for line in out.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        if name and "REG:" in line:
            fields = dict(re.findall(r"(REG|STACK|LOCAL):(\d+)", line))
            res[name] = (
                f"{fields.get('REG', '?')} {fields.get('STACK', '?')} {fields.get('LOCAL', '?')}"
            )
            name = None
    return res


def demangle(name: str) -> str:
    """A readable kernel name (cu++filt when present)."""
    filt = shutil.which("cu++filt") or shutil.which("c++filt")
    if not filt:
        return name
    out = subprocess.run([filt, name], capture_output=True, text=True).stdout.strip()
    return re.sub(r"\(.*\)$", "", out.replace("static ", "").replace("void ", "")) or name


def main(argv: list[str] | None = None) -> int:
    """Prints one table row per kernel; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="90")
    ap.add_argument("--source", default=os.path.join("src", "cuda", "ndimage.cu"))
    ap.add_argument("--cubin", help="use this cubin instead of compiling")
    ap.add_argument("--quick", action="store_true", help="accepted for the benchmarks' runner")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = args.cubin or os.path.join(tmp, "ndimage.cubin")
        if not args.cubin:
            compile_cubin(args.source, args.arch, cubin)
        sass = subprocess.run(
            [tool("cuobjdump"), "-sass", cubin], capture_output=True, text=True, check=True
        ).stdout
        res = resources(cubin)
    print(f"| kernel (sm_{args.arch}) | SASS total | per output (est.) | reg stack local | how |")
    print("|---|---:|---:|---|---|")
    for name, insns in sorted(parse_sass(sass).items(), key=lambda kv: demangle(kv[0])):
        if "spin" in name or "scrub" in name:
            continue
        cost, how = per_output(demangle(name), insns)
        total = sum(1 for _, t in insns if opcode(t) != "NOP")
        shown = f"{cost:.1f}" if cost is not None else "-"
        print(f"| `{demangle(name)}` | {total} | {shown} | {res.get(name, '?')} | {how} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
