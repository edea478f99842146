"""SASS instruction counts of the ndimage kernels (src/cuda/ndimage.cu), per output.

Usage (no GPU needed; nvcc on PATH, cuobjdump from the ``nvidia-cuda-cuobjdump`` wheel or the
toolkit)::

    python benchmarks/sass_counts.py [--arch 90] [--cubin FILE] [--source src/cuda/ndimage.cu]

The source is compiled with setup.py's nvcc flags for one architecture (``-cubin
-arch=sm_90 -O3 -std=c++17 --expt-relaxed-constexpr -I src``), then ``cuobjdump -sass`` gives
each kernel's instructions and ``cuobjdump --dump-resource-usage`` its registers, stack and
local memory (spills show as LOCAL/STACK bytes).

How "instructions per output" is counted (a static estimate, not a measurement):

* A loop is the range from a backward branch's target to the branch.  The hot loop is the
  innermost loop with the most floating-point arithmetic (FADD/FFMA/FMUL/DADD/DFMA/DMUL); the
  staging loop is the longest innermost loop holding both a global load (LDG) and a shared
  store (STS).  Every instruction of a loop body counts, taken branches or not: a body that
  folds coordinates for every boundary mode counts all of them.
  A kernel with no such loop (fully unrolled) is taken whole instead.
* The steady-state cost of one floating-point operation is the hot loop's length divided by the
  operations in it, and that of one staged element the staging loop's length divided by its
  shared stores.
* Instructions per output = cost per operation x operations one output needs + cost per staged
  element x elements staged per output, for the geometry the issue targets: a 5x5x5 filter on
  512x512x256, 32x8x8 outputs per block (window 36x12x12).  The operations one output needs are
  given per kernel family in MODEL below (direct sums: kz*ky*kx; separable box sums: the adds
  of each pass spread over the block's outputs; running sums: two per output and axis).

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
# Box passes: x sums over SZ*SY rows of TX, y sums over SZ planes of TY*TX, z per output.
BOX_SEPARABLE = (SZ * SY * TX * K + SZ * TY * TX * K) / OUT_PER_BLOCK + K
BOX_RUNNING = (SZ * SY * TX * K + SZ * TY * TX * K) / OUT_PER_BLOCK + (K + 2 * (TZ - 1)) / TZ

# kernel name fragment -> (floating-point operations per output, staged elements per output)
MODEL: dict[str, tuple[float, float]] = {
    "fp_cu_correlate_kernel": (K**3, 0.0),
    "fp_cu_tiled_kernel": (K**3, STAGED),
    "fp_cu_box_kernel": (BOX_SEPARABLE, STAGED),
    "fp_cu_boxk_kernel": (BOX_RUNNING, STAGED),
    "fp_cu_run_kernel": (2.0, 0.0),
}


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
    """Estimated instructions per output of kernel name, and how it was found."""
    model = next((v for k, v in MODEL.items() if k in name), None)
    if model is None:
        return None, ""
    fp_need, staged = model
    inner = innermost(loops(insns))
    whole = (0, len(insns) - 1)
    hot = max(inner, key=lambda s: body_stats(insns, s)[1], default=None)
    if hot is None or body_stats(insns, hot)[1] == 0:
        hot = whole
    n, fp, _, _ = body_stats(insns, hot)
    cost = n / fp * fp_need if fp else 0.0
    how = f"hot {n}/{fp}fp"
    if staged:
        stage = [s for s in inner if body_stats(insns, s)[2] and body_stats(insns, s)[3]]
        span = max(stage, key=lambda s: s[1] - s[0], default=whole)
        n2, _, _, sts = body_stats(insns, span)
        if sts:
            cost += n2 / sts * staged
            how += f", stage {n2}/{sts}sts"
    return cost, how


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
        cost, how = per_output(name, insns)
        total = sum(1 for _, t in insns if opcode(t) != "NOP")
        shown = f"{cost:.1f}" if cost is not None else "-"
        print(f"| `{demangle(name)}` | {total} | {shown} | {res.get(name, '?')} | {how} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
