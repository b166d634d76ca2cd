"""The run explorer on the main job's run: how long it takes to write, how large it is
against the run's compressed records, and how fast it opens and filters in headless
Chromium (Playwright, network off: every request other than file:// fails the bench).

Makes the main job's run (``fairness-tests audit --out DIR``: the committed recordings
replayed, offline) unless ``--run`` names one, writes its explorer (``fairness-tests
view RUN --out DIR``), then ``--repeats`` times in a fresh page: time to first render
(the page's own mark: milliseconds since the navigation started, when the verdict table
is on screen), opening the largest cell (every answer of a BBQ cell), applying a filter
on it (one value of its template column) and sorting by a column (the page's own
timings of its work, and the wall time of each Playwright action); medians printed.

    python bench/bench_view.py [--run report/run] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser import Opened, launch  # noqa: E402


def command(*args: str) -> float:
    """Run ``fairness-tests ARGS`` (from the repository root); its wall seconds."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fairness_tests", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def once(browser, index: Path) -> dict[str, float]:
    """One fresh page: the timings of its first render, the largest cell, a filter."""
    t = time.perf_counter()
    o = Opened(browser, index)
    p = o.page
    p.wait_for_selector("body[data-ready='1']", timeout=120_000)
    out = {"first render (page mark, ms)": p.evaluate("window.__explore.firstRender"),
           "load to ready (wall, ms)": (time.perf_counter() - t) * 1000}
    sizes = [int(x or 0) for x in p.locator("#vtable tbody tr td:nth-child(8)")
             .all_text_contents()]
    row = p.locator("#vtable tbody tr").nth(sizes.index(max(sizes)))
    t = time.perf_counter()
    row.locator("button").click()
    p.wait_for_selector("#cell-view:not([hidden])")
    out["open the largest cell (wall, ms)"] = (time.perf_counter() - t) * 1000
    out["answers in that cell"] = max(sizes)
    select = p.locator("#ifilters select").first
    value = select.locator("option").nth(1).get_attribute("value")
    t = time.perf_counter()
    select.select_option(value)
    out["apply a filter (page, ms)"] = p.evaluate("window.__explore.lastFilter")
    out["apply a filter (wall, ms)"] = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    p.select_option("#i-sort", index=3)
    out["sort (page, ms)"] = p.evaluate("window.__explore.lastFilter")
    out["sort (wall, ms)"] = (time.perf_counter() - t) * 1000
    if o.problems:
        raise SystemExit(f"the page reported problems: {o.problems}")
    o.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", help="a run directory (default: the main job's, made here)")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run = Path(a.run) if a.run else Path(d) / "report" / "run"
        if not a.run:
            print(f"main job: {command('audit', '-q', '--out', str(run.parent)):.1f} s")
        records = sum(p.stat().st_size for p in (run / "records").glob("*.csv.gz"))
        n = sum(1 for p in (run / "records").glob("*.csv.gz"))
        out = Path(d) / "explore"
        print(f"view: {command('view', str(run), '--out', str(out)):.1f} s")
        size = (out / "index.html").stat().st_size
        print(f"explorer {size / 1e6:.2f} MB vs the run's {n} compressed records "
              f"{records / 1e6:.2f} MB: {size / records:.2f}x")
        rounds = []
        with launch() as browser:
            for _ in range(a.repeats):
                rounds.append(once(browser, out / "index.html"))
        print(f"{a.repeats} rounds, medians (load average {os.getloadavg()[0]:.1f}):")
        for k in rounds[0]:
            print(f"  {k}: {statistics.median(r[k] for r in rounds):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
