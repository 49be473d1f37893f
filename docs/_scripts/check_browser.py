"""Load the built site in headless Chromium as a reader would, offline, and save screenshots.

Serves ``site/`` on 127.0.0.1, opens the home page, Getting started, a concepts page, the PPO
algorithm page, the PPO entry of the API reference and a search for "PPO" in Debian's Chromium
(``/usr/bin/chromium``, driven by playwright, which downloads no browser), and fails on:

- a console error or an uncaught exception in a page;
- any request to a host other than the local server (fonts, scripts, maths or search from a CDN);
- a request the server answers with an error (a missing asset);
- a page without its expected content: typeset maths where the page has maths, the PPO
  signature, search results.

Screenshots go to ``site-screenshots/`` (git-ignored). Usage, after ``make docs``:
``python docs/_scripts/check_browser.py [--site site] [--out site-screenshots]``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# (screenshot name, path under the site, CSS selector that must be visible once loaded)
PAGES = [
    ("home", "index.html", "article h1"),
    ("getting-started", "getting-started/index.html", "article table"),
    ("concepts-batches", "concepts/batches/index.html", "article table"),
    ("concepts-replays", "concepts/replays/index.html", "article table"),
    ("algorithm-ppo", "algorithms/ppo/index.html", "article img"),
    ("api-ppo", "reference/algos/index.html#lightning_rl.algos.PPO",
     "[id='lightning_rl.algos.PPO'] ~ div .doc-signature"),
    ("benchmarks-learning", "benchmarks/learning/index.html", "article img"),
    ("search-ppo", "index.html?q=PPO", ".md-search-result__item"),
]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def check(site: Path, out: Path) -> list[str]:
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    server, base = serve(site)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                viewport={"width": 1280, "height": 900},
            )
            for name, path, selector in PAGES:
                page = context.new_page()
                where = f"{name} ({path})"

                def on_request(request: object, where: str = where) -> None:
                    url = request.url  # type: ignore[attr-defined]
                    host = urlparse(url).hostname
                    if urlparse(url).scheme not in ("data", "blob", "about") and host != "127.0.0.1":
                        problems.append(f"{where}: request leaves the machine: {url}")

                def on_response(response: object, where: str = where) -> None:
                    if response.status >= 400:  # type: ignore[attr-defined]
                        problems.append(f"{where}: {response.status} for {response.url}")  # type: ignore[attr-defined]

                def on_console(message: object, where: str = where) -> None:
                    if message.type == "error":  # type: ignore[attr-defined]
                        problems.append(f"{where}: console error: {message.text}")  # type: ignore[attr-defined]

                page.on("request", on_request)
                page.on("response", on_response)
                page.on("console", on_console)
                page.on("pageerror", lambda error, where=where: problems.append(f"{where}: page error: {error}"))
                page.goto(base + path, wait_until="networkidle")
                try:
                    page.wait_for_selector(selector, state="visible", timeout=15_000)
                except Exception:  # noqa: BLE001 - playwright's TimeoutError; reported as a problem
                    problems.append(f"{where}: no visible {selector!r}")
                if page.locator(".arithmatex").count() and not page.locator(".arithmatex .katex").count():
                    problems.append(f"{where}: maths not typeset")
                page.wait_for_timeout(300)
                page.screenshot(path=str(out / f"{name}.png"))
                page.close()
            context.close()
    finally:
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=Path("site"))
    parser.add_argument("--out", type=Path, default=Path("site-screenshots"))
    args = parser.parse_args()
    if not (args.site / "index.html").is_file():
        sys.exit(f"{args.site}/index.html does not exist: run `make docs` first")
    if not Path(CHROMIUM).is_file():
        sys.exit(f"{CHROMIUM} does not exist: apt-get install -y chromium")
    problems = check(args.site, args.out)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        sys.exit(f"browser check: {len(problems)} problem(s)")
    print(f"browser check: {len(PAGES)} pages loaded offline without errors; screenshots in {args.out}/")


if __name__ == "__main__":
    main()
