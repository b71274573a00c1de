"""Headless Chromium for the HTML report's tests and benchmark: the system's Chromium (the set-up installs
the `chromium` package where it can, as it installs clang), driven by Playwright."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parent.parent / "build" / "screenshots"  # git-ignored test artifacts
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Reads a map's picture (the one <image> inside its figure) at one pixel per cell: [r, g, b, a, r, ...].
READ_CELLS = """figure => new Promise((done, fail) => {
    const image = figure.querySelector('image');
    const picture = new Image();
    picture.onload = () => {
        const canvas = document.createElement('canvas');
        canvas.width = picture.naturalWidth; canvas.height = picture.naturalHeight;
        const context = canvas.getContext('2d');
        context.drawImage(picture, 0, 0);
        done({width: canvas.width, height: canvas.height,
              rgba: Array.from(context.getImageData(0, 0, canvas.width, canvas.height).data)});
    };
    picture.onerror = () => fail('the map has no readable picture');
    picture.src = image.getAttribute('xlink:href') || image.getAttribute('href');
})"""


def chromium() -> str | None:
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def unavailable() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if chromium() is None:
        return "no Chromium on PATH (the set-up installs the chromium package where it runs as root)"
    return None


@contextlib.contextmanager
def browser():
    """One headless Chromium for a test module; closed when the module is done."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        # --no-sandbox: Chromium's sandbox refuses to start as root, as CI containers run
        launched = driver.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


class Opened:
    """A report open in a page, with every console error and uncaught page error it raised."""

    def __init__(self, browser, path: Path, width: int = 1300):
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.resolve().as_uri(), wait_until="load")

    def cells(self, selector: str) -> dict:
        return self.page.locator(selector).evaluate(READ_CELLS)

    def screenshot(self, name: str, selector: str | None = None) -> Path:
        """The whole page, or the one element of `selector`, as build/screenshots/NAME.png."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        if selector is None:
            self.page.screenshot(path=str(path), full_page=True)
        else:
            self.page.locator(selector).screenshot(path=str(path))
        return path

    def close(self) -> None:
        self.page.close()


def picture(report: Path, png: Path, width: int = 1200, height: int = 900) -> None:
    """The top of an HTML report as the browser shows it (`width` x `height`): the pictures in the docs."""
    with browser() as launched:
        opened = Opened(launched, report, width)
        opened.page.set_viewport_size({"width": width, "height": height})
        if opened.errors:
            raise SystemExit(f"{report}: the page raised {opened.errors[0]}")
        opened.page.screenshot(path=str(png))
        opened.close()


if __name__ == "__main__":  # python tests/browser.py REPORT.html PICTURE.png (make docs-picture)
    import sys

    picture(Path(sys.argv[1]), Path(sys.argv[2]))
