"""Headless Chromium for the HTML report tests: loads a page with a probe script injected and
returns what the probe wrote.  ``chromium()`` finds the browser (installing Debian's package
when it can) or returns None with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Dict, Optional, Tuple

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Runs before the page's own script: every error and console.error is recorded.
_HEAD_PROBE = """<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push("error: " + e.message); });
window.addEventListener("unhandledrejection", function (e) {
  window.__errors.push("rejection: " + e.reason); });
(function () { var orig = console.error; console.error = function () {
  window.__errors.push("console.error: " + Array.prototype.join.call(arguments, " "));
  return orig.apply(console, arguments); }; })();
</script>"""


def _browser_env() -> dict:
    """The environment for Chromium: this process's, less the sanitizer preload (under
    .ci/sanitize the tests run with libasan preloaded; the browser runs none of fastprof)."""
    drop = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def chromium() -> Tuple[Optional[str], str]:
    """(path of a Chromium, "") or (None, why there is none)."""
    for name in _CANDIDATES:
        p = shutil.which(name)
        if p:
            return p, ""
    if os.geteuid() == 0 and shutil.which("apt-get"):
        r = subprocess.run(
            "apt-get update -qq && apt-get install -y -qq chromium",
            shell=True,
            capture_output=True,
            text=True,
            timeout=900,
        )
        p = shutil.which("chromium")
        if p:
            return p, ""
        return None, f"apt-get install chromium failed: {r.stderr.strip()[-300:]}"
    return None, "no chromium on PATH, and apt-get is not available to install it"


def probe(
    browser: str, page: str, script: str, tmpdir: str, timeout: float = 120
) -> Dict[str, Any]:
    """Loads ``page`` (HTML text) with ``script`` (JavaScript that sets ``window.__result``)
    run after the page's own, and returns {"result": ..., "errors": [...], "load_ms": ...,
    "dom": the page's final HTML}."""
    tail = (
        "<script>(function () { var out = {}; try { out.result = (function () {\n"
        + script
        + "\n})(); } catch (e) {"
        " window.__errors.push('probe: ' + e + ' ' + e.stack); }"
        "out.errors = window.__errors; out.load_ms = window.__load_ms;"
        "var pre = document.createElement('pre'); pre.id = '__probe';"
        "pre.textContent = JSON.stringify(out); document.body.appendChild(pre); })();"
        "</script>"
    )
    stamp = "<script>window.__load_ms = performance.now();</script>"
    head_at = page.index("<head>") + len("<head>")
    end_at = page.rindex("</body>")
    text = page[:head_at] + _HEAD_PROBE + page[head_at:end_at] + stamp + tail + page[end_at:]
    path = os.path.join(tmpdir, "probe.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={os.path.join(tmpdir, 'profile')}",
        "--dump-dom",
        "file://" + path,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_browser_env())
    dom = r.stdout
    start = dom.find('<pre id="__probe">')
    if start < 0:
        raise AssertionError(f"the probe did not run; chromium said: {r.stderr[-2000:]}")
    end = dom.index("</pre>", start)
    import html

    out = json.loads(html.unescape(dom[start + len('<pre id="__probe">') : end]))
    out["dom"] = dom
    return out


def screenshot(browser: str, path_html: str, png: str, tmpdir: str) -> None:
    """Writes a screenshot of a page (for a person to look at)."""
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={os.path.join(tmpdir, 'profile-shot')}",
            "--window-size=1400,1000",
            f"--screenshot={png}",
            "file://" + path_html,
        ],
        capture_output=True,
        timeout=120,
        env=_browser_env(),
    )
