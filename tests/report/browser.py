"""Open a page in headless Chromium over the DevTools protocol and report what a reader would see.

A plain ``chromium --headless --screenshot`` cannot tell whether the page logged errors or whether its
images decoded; the DevTools protocol can. This speaks just enough of it (websocket-client, no driver
download): load the page, collect console errors and uncaught exceptions, evaluate a probe script, take a
screenshot.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class PageReport:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.probe: Any = None
        self.screenshot: bytes = b""


def inspect_page(url: str, probe_js: str, *, timeout_s: float = 60.0, width: int = 1200) -> PageReport:
    import websocket  # websocket-client

    chromium = find_chromium()
    if chromium is None:
        raise RuntimeError("no Chromium found (Debian: apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="dgxperf-chromium-")
    args = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}",
            f"--window-size={width},900", "about:blank"]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = PageReport()
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"Chromium did not open its DevTools port (exit {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            targets = json.load(response)
        page = next(t for t in targets if t.get("type") == "page")
        ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout_s)
        counter = 0

        def call(method: str, **params: Any) -> Any:
            nonlocal counter
            counter += 1
            ws.send(json.dumps({"id": counter, "method": method, "params": params}))
            while True:
                message = json.loads(ws.recv())
                if message.get("id") == counter:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return message.get("result")
                note(message)

        def note(message: dict[str, Any]) -> None:
            method, params = message.get("method"), message.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                report.errors.append("console: " + " ".join(str(a.get("value")) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                report.errors.append("exception: " + str(params["exceptionDetails"].get("text")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                report.errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Page.loadEventFired":
                loaded.append(True)

        loaded: list[bool] = []
        for domain in ("Page", "Runtime", "Log"):
            call(f"{domain}.enable")
        call("Page.navigate", url=url)
        while not loaded:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not finish loading in {timeout_s} s")
            note(json.loads(ws.recv()))
        evaluated = call("Runtime.evaluate", expression=probe_js, returnByValue=True, awaitPromise=True)
        report.probe = evaluated.get("result", {}).get("value")
        metrics = call("Page.getLayoutMetrics")
        height = min(int(metrics["cssContentSize"]["height"]), 6000)
        shot = call("Page.captureScreenshot", format="jpeg", quality=45, captureBeyondViewport=True,
                    clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 0.5})  # fmt: skip
        report.screenshot = base64.b64decode(shot["data"])
        ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
    return report
