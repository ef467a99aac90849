"""What a reader sees: open every page of the built book in headless Chromium and check it.

Needs a built book (`make book`) and Debian's `chromium` + `chromium-driver` (driven by Selenium);
skipped with the reason otherwise. Saves a full-page screenshot of each page in build/screenshots/.
"""
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "build" / "screenshots"
PAGES = sorted(HTML.glob("notebooks/*.html")) + sorted(HTML.glob("book/**/*.html")) + [HTML / "index.html"]
CHAPTERS = {path for path in PAGES if path.parent.name in ("notebooks", "recorded")}
MACHINE_PATH = re.compile(r"(?<![\w.])/(tmp|root|home|work)/")
RAW_TABLE = re.compile(r"\|\s*:?-{3,}:?\s*\|")
RAW_MATH = re.compile(r"(?<![\\$])\$[^$\s][^$\n]{0,80}\$(?!\$)")


def _browser_paths():
    chromium = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                     if shutil.which(name)), None)
    return chromium, shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not (HTML / "index.html").exists():
        pytest.skip("no book built: run `make book` first")
    chromium, chromedriver = _browser_paths()
    if not (chromium and chromedriver):
        pytest.skip("no browser: `apt-get install -y chromium chromium-driver` (Debian) to run the browser test")
    webdriver = pytest.importorskip("selenium.webdriver", reason="`pip install selenium` to run the browser test")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=chromedriver), options=options)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def _open(driver, page: Path) -> None:
    driver.get(page.as_uri())
    driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all([...document.images].map(img => img.decode().catch(() => null))).then(() => done());""")


def _prose_text(driver) -> str:
    """The article's visible text without code blocks and code outputs shown as text."""
    return driver.execute_script("""
        const article = document.querySelector('article') || document.body;
        const copy = article.cloneNode(true);
        copy.querySelectorAll('pre, code, .MathJax, mjx-container, script').forEach(node => node.remove());
        return copy.innerText;""")


def _table_headers(driver) -> list[str]:
    """The header row of every rendered <table>, cells joined by ' | ', lower case."""
    return driver.execute_script("""
        return [...document.querySelectorAll('table')].filter(t => t.rows.length)
            .map(t => [...t.rows[0].cells].map(c => c.innerText.trim()).join(' | ').toLowerCase());""")


def _screenshot(driver, page: Path) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 1000), 30000))
    driver.save_screenshot(str(SHOTS / f"{page.parent.name}_{page.stem}.png"))
    driver.set_window_size(1400, 1000)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_page_reads_as_a_reader_needs(browser, page):
    _open(browser, page)
    _screenshot(browser, page)
    broken = browser.execute_script(
        "return [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert not broken, f"{page.name}: images that did not decode: {broken[:3]}"
    text = _prose_text(browser)
    assert not RAW_TABLE.search(text), f"{page.name}: a Markdown table is shown as raw text"
    raw_math = RAW_MATH.findall(text)
    assert not raw_math, f"{page.name}: raw TeX shown as text: {raw_math[:3]}"
    stderr = browser.execute_script("return document.querySelectorAll('.output.stderr, .stderr').length")
    assert stderr == 0, f"{page.name}: {stderr} stderr/warning output areas"
    body = browser.execute_script("return document.body.innerText")
    assert not MACHINE_PATH.search(body), f"{page.name}: shows a machine path: {MACHINE_PATH.search(body).group(0)}"
    links = browser.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    here = Path(unquote(urlparse(browser.current_url).path)).parent  # index.html redirects to the first page
    missing = [href for href in links if not urlparse(href).scheme and not href.startswith("#")
               and not (here / unquote(urlparse(href).path)).exists()]
    assert not missing, f"{page.name}: in-book links to missing files: {missing[:5]}"


@pytest.mark.parametrize("page", sorted(CHAPTERS), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_chapter_shows_figures_and_its_paper_vs_run_table(browser, page):
    _open(browser, page)
    figures = browser.execute_script(
        "return [...document.querySelectorAll('.cell_output img')].filter(i => i.naturalWidth > 0).length")
    assert figures > 0, f"{page.name}: no figure rendered in the cell outputs"
    headers = _table_headers(browser)
    assert any("paper" in h and "this run" in h for h in headers), f"{page.name}: no paper-vs-run <table>"


def test_results_page_has_verdicts(browser):
    page = HTML / "book" / "results.html"
    _open(browser, page)
    headers = _table_headers(browser)
    assert any("verdict" in h for h in headers), "results page: no table with a verdict column"
    assert any("meets" in h and "falls short" in h for h in headers), "results page: no per-chapter verdict count"
