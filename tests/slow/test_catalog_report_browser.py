"""The HTML report in a real headless browser (Chromium from Debian's packages).

Skipped, saying so, where Chromium is not installed (`apt-get install chromium`), except
under CI (`.ci/run` installs it and sets ALIGNFLOW_REQUIRE_CHROMIUM=1: a missing Chromium
fails there). Checks:
the page renders with every panel, every image loads, no console error, and a full-page
screenshot is not blank.
"""

from __future__ import annotations

import io
import os
import re

import pytest

from alignflow.artifacts.store import Store
from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import render_report
from alignflow.catalog.report.compare import render_comparison
from tests.fast.test_catalog_report import report_store
from tests.slow.chromium import find_chromium, load

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    find_chromium() is None and os.environ.get("ALIGNFLOW_REQUIRE_CHROMIUM") != "1",
    reason="chromium not installed (Debian: apt-get install chromium): the browser check "
           "of the HTML report did not run")]


def _not_blank(png: bytes, width: int, height: int) -> None:
    import numpy as np
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (width, height)
    colors = image.getcolors(maxcolors=1 << 24)
    background = np.array(max(colors)[1], dtype=np.int32)
    pixels = np.asarray(image, dtype=np.int32)
    inked = float((np.abs(pixels - background).sum(axis=2) > 60).mean())
    assert inked > 0.03, f"only {inked:.1%} of the page differs from its background"
    assert len(colors) > 200  # text, plots and colours, not one flat fill


def _check(path, html: str) -> None:
    page = load(path)
    assert page.errors == []
    assert page.titles == re.findall(r"<h2>(.*?)</h2>", html)
    assert len(page.images) == html.count("<img ") > 0
    for image in page.images:
        assert image["complete"] and image["width"] > 200 and image["height"] > 100, image
    _not_blank(page.screenshot, 1300, page.height)


RUNS = ("rl", "dpo", "sft", "failed", "rl,failed")  # the last: two runs compared


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, tuple]:
    """run id -> (path of its report, the HTML)."""
    folder = tmp_path_factory.mktemp("browser")
    store = Store.open(str(folder / "store"))
    report_store(store)
    out = {}
    with Catalog(store) as cat:
        for run_id in RUNS:
            ids = run_id.split(",")
            html = render_report(cat, run_id) if len(ids) == 1 else render_comparison(cat, ids)
            (folder / f"{run_id}.html").write_text(html, encoding="utf-8")
            out[run_id] = (folder / f"{run_id}.html", html)
    return out


@pytest.mark.parametrize("run_id", RUNS)
def test_report_renders_in_chromium(reports, run_id):
    _check(*reports[run_id])


def test_the_checker_sees_broken_pages(tmp_path):
    """A broken image and a console error are caught (so the checks above can fail)."""
    path = tmp_path / "broken.html"
    path.write_text('<html><body><section><h2>x</h2><img src="data:image/png;base64,AAAA">'
                    "</section><script>console.error('boom')</script></body></html>")
    page = load(path)
    assert page.titles == ["x"]
    assert page.images[0]["width"] == 0
    assert any("boom" in e for e in page.errors)
