"""What the console's browser tests share: Debian's Chromium driven by Playwright (`/usr/bin/chromium`,
installed by .ci/run; Playwright's own browser downloads are not possible here), a browser context that
fails the test if a page breaks the Content-Security-Policy, and a way to run an event loop of our own
beside Playwright's."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest

CHROMIUM = os.environ.get("MCP_HARNESS_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require() -> ModuleType:
    """Playwright's sync API; the calling test module is skipped without Chromium or Playwright (call
    it at the module's top)."""
    if not shutil.which(CHROMIUM):
        pytest.skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
    return pytest.importorskip("playwright.sync_api")


@contextmanager
def launched() -> Iterator[Any]:
    """Chromium, headless (for a module-scoped `browser` fixture)."""
    with require().sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


class Watched:
    """A browser context that collects every Content-Security-Policy violation its pages report (the
    console line, and the document's own `securitypolicyviolation` event: a console line can be lost
    while a page unloads); `close()` fails the test if there was one."""

    def __init__(self, browser: Any, width: int, height: int = 900) -> None:
        self.ctx = browser.new_context(viewport={"width": width, "height": height})
        self.violations: list[str] = []
        self.ctx.on(
            "console",
            lambda m: (
                self.violations.append(f"{m.page.url if m.page else ''}: {m.text}")
                if "Content Security Policy" in m.text
                else None
            ),
        )
        self.ctx.expose_function("cspViolation", lambda text: self.violations.append(text))
        self.ctx.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => window.cspViolation("
            "`${e.documentURI}: ${e.violatedDirective} ${e.sourceFile}:${e.lineNumber} ${e.sample}`))"
        )

    def close(self) -> None:
        self.ctx.close()
        assert self.violations == []


def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run `fn` (which may start an event loop of its own) beside Playwright's loop; its value, or its
    exception raised here."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=300)
    if "error" in out:
        raise out["error"]
    return out.get("value")
