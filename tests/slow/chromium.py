"""Open a page in headless Chromium over the DevTools protocol (aiohttp's websocket client).

`load(path)` starts a throw-away browser (its own profile folder, port chosen by Chromium),
opens the file, and returns what a test checks: console messages and errors, every image's
load state, the section titles, and a full-page PNG screenshot. `find_chromium()` is None
when no Chromium is installed (Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

_PROBE = """JSON.stringify({
  images: Array.from(document.images).map(i => ({complete: i.complete, width: i.naturalWidth,
                                                height: i.naturalHeight, alt: i.alt})),
  titles: Array.from(document.querySelectorAll('section h2')).map(h => h.textContent),
  height: document.documentElement.scrollHeight})"""


@dataclass
class Loaded:
    images: list[dict]
    titles: list[str]
    height: int
    screenshot: bytes
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads


def find_chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser",
                                                        "google-chrome")) if p), None)


def load(path: Path, width: int = 1300, timeout: float = 60.0) -> Loaded:
    """Open `path` in a fresh headless Chromium and report on it."""
    profile = tempfile.mkdtemp(prefix="af-chromium-")
    proc = subprocess.Popen(
        [find_chromium() or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--disable-extensions", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", f"--window-size={width},900", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = _port(Path(profile), proc, timeout)
        return asyncio.run(asyncio.wait_for(_session(port, path.resolve().as_uri(), width),
                                            timeout))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _port(profile: Path, proc: subprocess.Popen, timeout: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text().split()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with code {proc.returncode}")
        time.sleep(0.1)
    raise TimeoutError("chromium did not open its DevTools port")


class _Cdp:
    """Commands and events over one DevTools websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws, self.next_id, self.events = ws, 0, []

    async def call(self, method: str, **params) -> dict:
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    async def until(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads((await self.ws.receive()).data))


async def _session(port: int, url: str, width: int) -> Loaded:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json()
        target = next(t for t in targets if t["type"] == "page")
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            cdp = _Cdp(ws)
            for domain in ("Page", "Runtime", "Log"):
                await cdp.call(f"{domain}.enable")
            await cdp.call("Page.navigate", url=url)
            await cdp.until("Page.loadEventFired")
            probe = await cdp.call("Runtime.evaluate", expression=_PROBE, returnByValue=True)
            info = json.loads(probe["result"]["value"])
            await cdp.call("Emulation.setDeviceMetricsOverride", width=width,
                           height=info["height"], deviceScaleFactor=1, mobile=False)
            shot = await cdp.call("Page.captureScreenshot", format="png")
            return Loaded(info["images"], info["titles"], info["height"],
                          base64.b64decode(shot["data"]), _errors(cdp.events))


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            out.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            out.append(params["entry"]["text"])
    return out
