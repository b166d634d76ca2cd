"""The HTML card in a real headless Chromium.

Chromium is driven through its DevTools protocol over a websocket, with a
minimal stdlib websocket client below (no selenium, no new dependency). The
page is opened from a file:// URL; the test collects every console message,
log entry, uncaught exception and network request, then reads the rendered DOM
and takes a full-page screenshot (saved to $FAIRNESS_SCREENSHOT_DIR when set).

Needs the Debian packages ``chromium`` (and ``chromium-driver`` in CI images). If
no Chromium binary is found the tests skip, unless FAIRNESS_REQUIRE_BROWSER=1
(set in CI), where they fail.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import USER, make_run  # noqa: E402

from fairness_tests.card import write_cards  # noqa: E402

pytestmark = pytest.mark.browser

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--disable-extensions", "--window-size=1280,2400", "--remote-debugging-port=0"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("FAIRNESS_REQUIRE_BROWSER") == "1":
        pytest.fail("FAIRNESS_REQUIRE_BROWSER=1 but no chromium binary on PATH "
                    "(apt-get install -y chromium chromium-driver)")
    pytest.skip("no chromium binary (apt-get install -y chromium chromium-driver)")


# ---------------------------------------------------------------- minimal websocket (RFC 6455)

class WebSocket:
    def __init__(self, url: str, timeout: float = 30.0):
        assert url.startswith("ws://"), url
        hostport, _, path = url[5:].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake failed: {head[:200]!r}")

    def _recv_exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return buf

    def send(self, text: str) -> None:
        payload = text.encode()
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._recv_exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._recv_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._recv_exact(8))[0]
            mask = self._recv_exact(4) if b1 & 0x80 else None
            data = self._recv_exact(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x8:
                raise ConnectionError("websocket closed by peer")
            if opcode == 0x9:     # ping -> pong
                self.sock.sendall(bytes([0x8A, 0x80 | len(data)]) + b"\0\0\0\0" + data)
                continue
            message += data
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Page:
    """One Chromium page over CDP; records console/log/exception/network events."""

    def __init__(self, ws: WebSocket):
        self.ws, self.next_id, self.events = ws, 0, []

    def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        if any(e["method"] == method for e in self.events):
            return
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return
        raise TimeoutError(method)

    def problems(self) -> list[str]:
        """Console errors/warnings, log errors, exceptions and non-local network requests."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value') for a in p.get('args', [])]}")
            elif m == "Runtime.exceptionThrown":
                out.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append(f"log {p['entry'].get('source')}: {p['entry'].get('text')}")
            elif m == "Network.requestWillBeSent":
                url = p.get("request", {}).get("url", "")
                if not url.startswith(("file://", "data:", "about:")):
                    out.append(f"network request: {url}")
        return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = _chromium()
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        end = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("chromium did not start (no DevToolsActivePort)")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def open_page(port: int, path: Path) -> Page:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=30) as r:
        target = json.load(r)
    page = Page(WebSocket(target["webSocketDebuggerUrl"]))
    for domain in ("Runtime", "Log", "Network", "Page"):
        page.call(f"{domain}.enable")
    page.call("Emulation.setDeviceMetricsOverride", width=1280, height=2400,
              deviceScaleFactor=1, mobile=False)
    page.call("Page.navigate", url=path.resolve().as_uri())
    page.wait_for("Page.loadEventFired")
    page.call("Runtime.evaluate", expression="1", awaitPromise=False)  # drain pending events
    time.sleep(0.3)
    page.call("Runtime.evaluate", expression="1")
    return page


DOM_PROBE = """JSON.stringify({
  sections: [...document.querySelectorAll('section.card-section')].map(s => s.id),
  plots: [...document.querySelectorAll('svg.plot')].map(s => s.dataset.plot),
  ci_bars: document.querySelectorAll('svg.plot line.ci').length,
  points: document.querySelectorAll('svg.plot .point').length,
  heat_cells: document.querySelectorAll('svg[data-plot=heatmap] rect.cell').length,
  bars: document.querySelectorAll('svg[data-plot=histogram] rect.bar').length,
  fail_cells: document.querySelectorAll('td.st-fail').length,
  missing: [...document.querySelectorAll('[data-missing]')].map(e => e.dataset.missing),
  scripts: document.scripts.length,
  title: document.title,
  h1: document.querySelector('h1').textContent,
  plot_width: Math.max(...[...document.querySelectorAll('svg.plot')].map(s => s.getBoundingClientRect().width)),
  height: document.documentElement.scrollHeight
})"""

EIGHT = ["identification", "intended_use", "fairness_scope", "protected_attributes",
         "evaluation_protocol", "metrics", "mitigations", "governance"]


def _probe(page: Page) -> dict:
    res = page.call("Runtime.evaluate", expression=DOM_PROBE, returnByValue=True)
    return json.loads(res["result"]["value"])


def _screenshot(page: Page, dest: Path, height: int) -> Path:
    shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                     clip={"x": 0, "y": 0, "width": 1280, "height": min(height, 16000), "scale": 1})
    dest.write_bytes(base64.b64decode(shot["data"]))
    keep = os.environ.get("FAIRNESS_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(dest, Path(keep) / dest.name)
    return dest


def test_full_card_renders_without_console_errors(browser, tmp_path):
    written = write_cards(make_run(), tmp_path / "card", USER)
    page = open_page(browser, written.paths["html"])
    try:
        dom = _probe(page)
        assert page.problems() == []
        assert dom["sections"][:8] == EIGHT
        assert dom["scripts"] == 0
        assert dom["h1"] == "Fairness Card — gemma-3-270m"
        kinds = dom["plots"]
        # per-slice rates: one panel per rate metric in the test run (stereotype, refusal,
        # pilot_harm) = 3; BBQ: accuracy, s_amb, s_dis, acc_reinf, acc_counter, sf, df,
        # invalid_rate = 8 panels; heatmaps: stereotype and refusal (pilot_harm has no
        # slice x family rows) = 2; histograms: MFAA and GTC = 2
        assert kinds.count("slice_rates") == 3
        assert kinds.count("bbq") == 8
        assert kinds.count("heatmap") == 2
        assert kinds.count("histogram") == 2
        # heatmap cells: 4 slices x 4 families x 2 metrics = 32; histogram bars 10 per plot
        assert dom["heat_cells"] == 32
        assert dom["bars"] == 20
        # CI bars: slice panels 3 metrics x 4 slices = 12; BBQ 20 rows all with a CI = 20
        assert dom["ci_bars"] == 32
        # three failing verdict cells (F1, F2, F3 of the stereotype rule)
        assert dom["fail_cells"] == 3
        assert dom["missing"] == []
        assert dom["plot_width"] <= 1280
        shot = _screenshot(page, tmp_path / "card_full.png", dom["height"])
        assert shot.stat().st_size > 10_000
    finally:
        page.ws.close()


def test_incomplete_bbq_only_card_shows_missing_fields(browser, tmp_path):
    written = write_cards(make_run("bbq"), tmp_path / "card")
    page = open_page(browser, written.paths["html"])
    try:
        dom = _probe(page)
        assert page.problems() == []
        assert dom["sections"][:8] == EIGHT and dom["sections"][8] == "missing_fields"
        assert "intended_use.in_scope" in dom["missing"]
        assert "governance.owner" in dom["missing"]
        assert "heatmap" not in dom["plots"] and "slice_rates" not in dom["plots"]
        assert dom["plots"].count("histogram") == 2
        _screenshot(page, tmp_path / "card_bbq_only.png", dom["height"])
    finally:
        page.ws.close()


def test_probe_detects_console_errors_and_network(browser, tmp_path):
    """Control: the same checks catch a broken SVG and an external resource."""
    written = write_cards(make_run("generative"), tmp_path / "card", USER)
    html = written.paths["html"].read_text(encoding="utf-8")
    broken = html.replace("</main>", '<svg class="plot" data-plot="x"><path d="M0,0 Lx"/></svg>'
                                      '<img src="http://127.0.0.1:9/x.png"></main>')
    bad = tmp_path / "broken.html"
    bad.write_text(broken, encoding="utf-8")
    page = open_page(browser, bad)
    try:
        problems = page.problems()
        assert any("path" in p and "attribute d" in p for p in problems), problems
        assert any("127.0.0.1:9" in p for p in problems), problems
    finally:
        page.ws.close()
