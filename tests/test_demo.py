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
    assert "NumPy is needed" in r.stderr and r.stdout == ""


def test_under_another_profiler_the_demo_says_it_cannot_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import fastprof

    with fastprof.Profile():
        status = main(["demo", "--size", "16"])
    assert status == 2
    assert "fastprof demo: cannot profile here:" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_demo_quietly() -> None:
    code = "import sys\nfrom fastprof.cli import main\nsys.exit(main(['demo', '--size', '16']))\n"
    p = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()  # as `| head -1` does
    err = p.stderr.read()
    assert p.wait() == 0
    assert b"Traceback" not in err
