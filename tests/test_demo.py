"""``python -m fastprof demo``: it profiles the pipeline, names the loop as the bottleneck
with its exact call count, checks the fixes against the loop, and says why the GPU step is
left out here."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

pytest.importorskip("numpy")

from fastprof import _demo  # noqa: E402
from fastprof.cli import main  # noqa: E402


def test_the_demo_finds_the_loop_and_checks_the_fixes() -> None:
    out = io.StringIO()
    assert _demo.main(["--size", "40", "--top", "4"], out=out) == 0
    text = out.getvalue()
    table = text[text.index("ncalls") : text.index("The smoothing loop takes")]
    rows = [line for line in table.splitlines()[1:] if line.strip()]
    assert len(rows) == 4  # --top 4: pipeline, fit, loop, window_mean (sorted by cumulative)
    assert any(r.split()[0] == "1600" and r.endswith("(window_mean)") for r in rows), rows
    assert "(1600 calls of window_mean)" in text
    assert "The table gives the loop's result" in text
    assert "fastprof.kernels.uniform_filter" in text and "On the GPU" in text


def test_the_demo_through_the_command_line_and_its_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--size", "16"]) == 0
    assert "calls of window_mean" in capsys.readouterr().out
    for bad, words in (
        (["--size", "4"], "--size must be at least 8, got 4"),
        (["--top", "0"], "--top must be at least 1, got 0"),
        (["--nope"], "unrecognized arguments: --nope"),
    ):
        with pytest.raises(SystemExit) as e:
            main(["demo", *bad])
        assert e.value.code == 2
        assert words in capsys.readouterr().err


def test_without_numpy_the_demo_says_what_it_needs() -> None:
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "from fastprof.cli import main\n"
        "sys.exit(main(['demo']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 2
    assert "NumPy is needed" in r.stdout
