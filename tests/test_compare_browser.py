"""The comparison page of real runs, opened in headless Chromium: DOM and screenshot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.conftest import VerifierRun, child_env

CHROMIUM = "/usr/bin/chromium"
FAMILIES = ("structured_output", "wire")
RUN_ARGS = ("--families", ",".join(FAMILIES))


def chromium() -> str:
    """Chromium's path, or a skip saying how to install it (a failure under CI)."""
    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if path is None:
        reason = (
            "chromium is not installed; install it with `apt-get install chromium` (Debian) "
            "to run the browser test"
        )
        if os.environ.get("VERIFIER_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def headless(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium without network side traffic, in its own profile folder."""
    return subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


class Dom(HTMLParser):
    """What the test looks for in the dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[tuple[str, dict[str, str]]] = []
        self.row_headers: list[str] = []
        self.col_headers: list[str] = []
        self.svgs = 0
        self.svg_titles = 0
        self.error_bars = 0
        self.banners: list[str] = []
        self.sections: list[str] = []
        self.chart_titles: list[str] = []
        self._text: list[str] | None = None
        self._title: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        self.open.append((tag, attributes))
        classes = attributes.get("class", "").split()
        if tag == "svg":
            self.svgs += 1
        elif tag == "title" and len(self.open) > 1 and self.open[-2][0] == "svg":
            self.svg_titles += 1
            self._title = []
        elif tag == "section":
            self.sections.append(attributes.get("id", ""))
        elif tag == "g" and "error-bar" in classes:
            self.error_bars += 1
        elif tag == "div" and "banner" in classes:
            self.banners.append(" ".join(classes))
        if tag == "th" and self._in_overview():
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            name, attributes = self.open.pop()
            if name == tag:
                break
        if tag == "title" and self._title is not None:
            self.chart_titles.append("".join(self._title).strip())
            self._title = None
        if tag == "th" and self._text is not None:
            text = "".join(self._text).strip()
            target = self.row_headers if attributes.get("scope") == "row" else self.col_headers
            target.append(text)
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)
        if self._title is not None:
            self._title.append(data)

    def _in_overview(self) -> bool:
        return any(
            tag == "table" and "overview" in a.get("class", "").split() for tag, a in self.open
        )


def compare_page(runs: list[VerifierRun], out: Path) -> tuple[Path, list[dict[str, Any]]]:
    cards = []
    paths = []
    for run in runs:
        assert (run.out / "scorecard.json").exists(), run.stderr[-2000:]
        cards.append(run.scorecard)
        paths.append(str(run.out / "scorecard.json"))
    page = out / "comparison.html"
    completed = subprocess.run(
        [sys.executable, "-m", "verifier", "compare", *paths, "--html", str(page)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return page, cards


def open_page(page: Path, tmp_path: Path) -> tuple[Dom, Image.Image]:
    browser = chromium()
    dumped = headless(browser, tmp_path / "profile-dom", "--dump-dom", page.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = Dom()
    dom.feed(dumped.stdout)
    screenshot = tmp_path / f"{page.stem}.png"
    shot = headless(
        browser,
        tmp_path / "profile-shot",
        f"--screenshot={screenshot}",
        "--window-size=1280,2000",
        page.as_uri(),
    )
    assert shot.returncode == 0 and screenshot.exists(), shot.stderr[-2000:]
    return dom, Image.open(screenshot).convert("RGB")


def vendor_name(card: dict[str, Any]) -> str:
    return f"{card['endpoint']['url']} · {card['endpoint']['model']}"


@pytest.mark.slow
def test_comparison_page_in_headless_chromium(
    simulator: Callable[..., str],
    run_verifier: Callable[..., VerifierRun],
    tmp_path: Path,
) -> None:
    chromium()
    clean = run_verifier(simulator(), *RUN_ARGS, "--repeats", "1")
    defective = run_verifier(
        simulator("--defect", "ignore-keyword:maxItems"), *RUN_ARGS, "--repeats", "1"
    )
    assert defective.family("structured_output")["verdict"] == "fail"
    comparable = tmp_path / "comparable"
    comparable.mkdir()
    page, cards = compare_page([clean, defective], comparable)
    dom, image = open_page(page, comparable)
    for card in cards:
        assert vendor_name(card) in dom.row_headers
    for name in FAMILIES:
        assert name in dom.col_headers
    assert dom.svgs >= len(FAMILIES) and dom.svg_titles == dom.svgs
    assert dom.error_bars >= len(FAMILIES) * len(cards)
    assert not dom.banners
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert len(colours) >= 8, "the screenshot is (nearly) blank"
    # The worse structured_output cell is drawn in its own colour (besides its marker).
    assert (255, 184, 176) in {c for _, c in colours} or (255, 228, 225) in {c for _, c in colours}
    # Speed and spend: a section with its charts; the failing vendor's speed is not ranked.
    assert "family-performance" in dom.sections
    assert {
        "performance: TTFT p50 ms (lower is better)",
        "performance: output tokens/s p50 (higher is better)",
    } <= set(dom.chart_titles)
    assert "(verdict fail: not ranked)" in page.read_text()

    # A run with other settings: the page says loudly that it is not comparable.
    other = run_verifier(simulator(), *RUN_ARGS, "--repeats", "2")
    incomparable = tmp_path / "incomparable"
    incomparable.mkdir()
    page, cards = compare_page([clean, defective, other], incomparable)
    dom, image = open_page(page, incomparable)
    assert len({vendor_name(c) for c in cards}) == 2  # clean and other share a vendor
    assert len(dom.row_headers) == 3
    assert any("incomparable" in banner for banner in dom.banners)
    assert "not comparable on settings: repeats" in page.read_text()
    assert sum(1 for h in dom.col_headers if h.endswith("⚠")) >= len(FAMILIES)
    assert len(image.getcolors(maxcolors=1 << 20) or []) >= 8


def test_missing_chromium_skips_or_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("VERIFIER_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        chromium()
    monkeypatch.setenv("VERIFIER_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="apt-get install chromium"):
        chromium()
