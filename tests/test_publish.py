"""`adh publish`: the dashboard as a file, and as headless Chromium shows it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.results.store import ResultsStore
from test_history import repo, result  # noqa: F401  (repo: a fixture, used by name)


@pytest.fixture
def site(repo, tmp_path: Path) -> tuple[Path, list[str]]:  # noqa: F811
    """A dashboard of two models x two frameworks over five commits, the MLP's allocations
    doubling at the fourth."""
    path, shas = repo
    store = tmp_path / "h.sqlite"
    with ResultsStore(store) as s:
        for i, sha in enumerate(shas):
            for fw in ("engine-static", "engine-dynamic"):
                s.save(result(sha, 10.0 + 0.1 * i, model="cnn", framework=fw))
                s.save(result(sha, 2.0, model="mlp", framework=fw,
                              alloc_mib=50.0 * (2 if i >= 3 else 1)))
    out = tmp_path / "site"
    assert main(["publish", "ci", "--store", str(store), "--out", str(out),
                 "--repo", str(path)]) == 0
    return out / "index.html", shas


@pytest.mark.slow
def test_the_page_holds_tables_regressions_figures_and_provenance(site) -> None:
    page, shas = site
    text = page.read_text()
    assert text.count('<img alt="history of') == 2  # a figure per model
    assert text.count("data:image/png;base64,") == 2  # inside the page: one file is the site
    assert "<h3>Latest results (commit " + shas[-1] in text
    regressions = re.search(r'<table class="regressions">(.*?)</table>', text).group(1)
    assert regressions.count("<tr>") == 3  # the header, and the MLP in both modes
    assert f"{shas[2]}..{shas[3]}" in regressions and "allocated" in regressions
    assert "<dt>Commits</dt><dd>5, " + shas[0] in text
    assert "http" not in text.replace("http-equiv", "")  # nothing fetched from anywhere


def _browser() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                               "google-chrome"))), None)


@pytest.mark.slow
def test_chromium_shows_the_page_from_file(site, tmp_path: Path) -> None:
    if _browser() is None:
        message = "needs chromium (apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI"):  # CI installs it: its absence there is a failure
            pytest.fail(message)
        pytest.skip(message)
    page, shas = site
    dom = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp_path / 'profile'}",
                          "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    # the page's script ran after the load event and counted the figures the browser decoded
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-figures="2"' in body and 'data-figures-shown="2"' in body
    assert "Performance history" in dom and f"{shas[2]}..{shas[3]}" in dom
    # a screenshot renders (docs/regressions.md's comes from the same command)
    shot = tmp_path / "shot.png"
    subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
                    f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@pytest.mark.slow
def test_an_out_folder_that_cannot_be_made_is_one_line(site, tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("")
    assert main(["publish", "ci", "--store", str(tmp_path / "h.sqlite"),
                 "--out", str(tmp_path / "file" / "site")]) == 2
    assert "cannot write to" in capsys.readouterr().err
