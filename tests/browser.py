"""A headless Chromium driven over the Chrome DevTools protocol, for the report tests.

Debian's chromium is started by the test with its network cut off (every host name resolves
to nothing, and any proxied request goes to a closed port); pages are opened from disk. The
client records console errors, uncaught exceptions, failed loads and every network request.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("NSIGHT_DOCTOR_BROWSER") or shutil.which("chromium") or shutil.which("chromium-browser")
requires_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian package chromium; .ci/run installs it)"
)


class Browser:
    def __init__(self) -> None:
        import websocket  # websocket-client, a test dependency

        assert CHROMIUM
        self.profile = tempfile.mkdtemp(prefix="nsight-doctor-chromium-")
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--proxy-server=http://127.0.0.1:9",
                "--hide-scrollbars",
                "--window-size=1280,900",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(p for p in pages if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
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

    def evaluate(self, expression: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open(self, path: Path, ready: str, timeout: float = 60) -> None:
        """Opens a file and waits until the JavaScript expression `ready` is true."""
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.time() + timeout
        while not self.evaluate(f"document.readyState === 'complete' && Boolean({ready})"):
            if time.time() > deadline:
                raise AssertionError(f"{path.name}: not ready after {timeout} s ({ready})")
            time.sleep(0.2)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads since the page was opened."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
            elif m == "Network.loadingFailed":
                out.append("load failed: " + json.dumps(p)[:300])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def mouse_move(self, x: float, y: float) -> None:
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def screenshot(self, path: Path) -> None:
        """The whole page, as PNG."""
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = self.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": 1280, "height": min(size["height"], 16000), "scale": 1},
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            if hasattr(self, "ws"):
                self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


def keep_artifact(path: Path) -> None:
    """Copies a test artifact (a screenshot, a report) to $NSIGHT_DOCTOR_ARTIFACTS when it is set."""
    dest = os.environ.get("NSIGHT_DOCTOR_ARTIFACTS")
    if dest:
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(dest) / path.name)
