"""What a reader sees: open every page of the built book in headless Chromium and check it.

Needs a built book (`make book`) and Debian's `chromium` + `chromium-driver` (driven by Selenium);
skipped with the reason otherwise. Saves a full-page screenshot of each page in build/screenshots/.

The browser runs with the network cut (no host name resolves), so a page that renders its equations
here renders them offline: MathJax comes from the book's own `_static/mathjax/`. Every request a page
makes to anything but its own files is reported as a failure.

The checks are small functions taking the driver (`overflowing_blocks`, `math_problems`,
`glue_problems`, `network_requests`); `test_*_flags_*` below prove each one fails on a tiny page that
has the defect, and passes on one that does not.
"""
import importlib.util
import json
import os
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
RAW_TEX_DELIMITERS = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]")
UNRESOLVED_GLUE = re.compile(r"\{glue(?::\w*)?\}`?[^`\s]*`?")
#: A glued object shown by its Python repr (a Markdown value read with {glue:text}, not {glue:md}).
OBJECT_REPR = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-f]+)?>")
WIDTH, HEIGHT = 1400, 1000
SLACK_PX = 1
# No host name resolves: pages load only their own files (file://), so nothing reaches a network.
NETWORK_CUT = "MAP * ~NOTFOUND"
LOCAL_SCHEMES = ("file", "data", "blob", "about", "chrome", "chrome-extension", "devtools")


def _browser_paths():
    """Chromium and its driver: $CHROME_PATH / $CHROMEDRIVER_PATH (CI's setup-chrome), else on PATH."""
    chromium = os.environ.get("CHROME_PATH") or next(
        (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome", "chrome")
         if shutil.which(name)), None)
    return chromium, os.environ.get("CHROMEDRIVER_PATH") or shutil.which("chromedriver")


@pytest.fixture(scope="module")
def chrome():
    """Headless Chromium at 1400 x 1000 with the network cut and its requests logged."""
    chromium, chromedriver = _browser_paths()
    if not (chromium and chromedriver):
        pytest.skip("no browser: `apt-get install -y chromium chromium-driver` (Debian) to run the browser test")
    webdriver = pytest.importorskip("selenium.webdriver", reason="`pip install selenium` to run the browser test")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={WIDTH},{HEIGHT}", f"--host-resolver-rules={NETWORK_CUT}",
                     "--disable-background-networking", "--disable-component-update", "--no-first-run",
                     "--allow-file-access-from-files"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=chromedriver), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def browser(chrome):
    if not (HTML / "index.html").exists():
        pytest.skip("no book built: run `make book` first")
    SHOTS.mkdir(parents=True, exist_ok=True)
    return chrome


# ---- Opening a page ---------------------------------------------------------------------------------

def wait_for_math(driver, timeout_s: float = 60) -> None:
    """Wait until MathJax 3 has typeset the page (at once when the page has no MathJax). The first page
    loads MathJax cold: on a loaded machine that took more than 20 s (the CI of c266fbd, index page)."""
    driver.set_script_timeout(timeout_s + 5)
    driver.execute_async_script("""
        const done = arguments[arguments.length - 1], deadline = Date.now() + arguments[0] * 1000;
        const wants = () => document.querySelector('.math') || document.querySelector('script[src*="mathjax" i]');
        (function poll() {
            const mj = window.MathJax;
            if (mj && mj.startup && mj.startup.promise) { mj.startup.promise.then(() => done(), () => done()); return; }
            if (!wants() || Date.now() > deadline) { done(); return; }
            setTimeout(poll, 100);
        })();""", timeout_s)


def _open(driver, page: Path) -> None:
    """Load ``page`` — following a redirect page (the book's index.html is a meta refresh to its
    first page) to the page it names — with its images decoded and its equations typeset."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    # a script run while the refresh navigates finds no document: ignored, asked again
    WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,)).until(lambda d: d.execute_script("""
        return document.readyState === 'complete' && document.body !== null
            && !document.querySelector('meta[http-equiv="Refresh" i]');"""))
    driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all([...document.images].map(img => img.decode().catch(() => null))).then(() => done());""")
    wait_for_math(driver)


def _prose_text(driver) -> str:
    """The article's visible text without code blocks and code outputs shown as text."""
    return driver.execute_script("""
        const article = document.querySelector('article') || document.body;
        const copy = article.cloneNode(true);
        copy.querySelectorAll('pre, code, .MathJax, mjx-container, script, style').forEach(node => node.remove());
        return copy.innerText;""")


def _table_headers(driver) -> list[str]:
    """The header row of every rendered <table>, cells joined by ' | ', lower case."""
    return driver.execute_script("""
        return [...document.querySelectorAll('table')].filter(t => t.rows.length)
            .map(t => [...t.rows[0].cells].map(c => c.innerText.trim()).join(' | ').toLowerCase());""")


def _screenshot(driver, page: Path) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, min(max(height, HEIGHT), 30000))
    driver.save_screenshot(str(SHOTS / f"{page.parent.name}_{page.stem}.png"))
    driver.set_window_size(WIDTH, HEIGHT)


# ---- The checks: each returns a list of problems, empty when the page is right ---------------------

def overflowing_blocks(driver, slack_px: int = SLACK_PX) -> list[str]:
    """Code blocks (`pre`, `div.highlight`) and tables wider than their container at 1400 px.

    A block overflows when it, or the wrapper that scrolls it, has scrollWidth > clientWidth + slack,
    or when it reaches past the right edge of the article column. Collapsed cells (hide-input) are
    opened first: a reader who opens them must not scroll sideways either.
    """
    return driver.execute_script("""
        const slack = arguments[0];
        document.querySelectorAll('details').forEach(d => { d.open = true; });
        const article = document.querySelector('article') || document.body;
        const right = article.getBoundingClientRect().right;
        const tag = el => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
            ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
        const name = el => (el.matches('pre') && el.parentElement.matches('div.highlight')
            ? tag(el.parentElement) + ' > ' : '') + tag(el);
        const problems = [];
        for (const el of article.querySelectorAll('pre, div.highlight, table')) {
            if (!el.getClientRects().length || el.closest('mjx-container')) continue;  // not displayed
            if (el.matches('div.highlight') && el.querySelector('pre')) continue;  // measured through its pre
            const boxes = [el, el.parentElement, el.parentElement && el.parentElement.parentElement]
                .filter(b => b && b !== article && article.contains(b));
            const scrolling = boxes.find(b => b.scrollWidth > b.clientWidth + slack);
            const past = el.getBoundingClientRect().right - right;
            if (scrolling || past > slack) {
                const box = scrolling || el;
                const text = (el.innerText || '').trim().split('\\n')[0].slice(0, 60);
                problems.push(`${name(el)} "${text}": ` + (scrolling
                    ? `${name(box)} scrollWidth ${box.scrollWidth} > clientWidth ${box.clientWidth}`
                    : `reaches ${Math.round(past)} px past the article column`));
            }
        }
        return problems;""", slack_px)


def math_problems(driver) -> list[str]:
    """Equations not rendered: Sphinx math (`.math`) without MathJax output, TeX errors, raw TeX text.

    Sphinx writes `$x$` / `$$...$$` as `<span|div class="math">\\(x\\)</span>`; MathJax 3 replaces
    the TeX by an `mjx-container`. With the network cut, that happens only when MathJax is served with
    the book.
    """
    state = driver.execute_script("""
        const article = document.querySelector('article') || document.body;
        const math = [...article.querySelectorAll('.math')].filter(m => !m.closest('pre, code'));
        const script = [...document.scripts].map(s => s.src).find(src => /mathjax/i.test(src)) || null;
        return {
            math: math.length,
            unrendered: math.filter(m => !m.querySelector('mjx-container'))
                            .map(m => m.textContent.trim().slice(0, 60)),
            errors: [...article.querySelectorAll('mjx-merror')].map(e => e.textContent.slice(0, 60)),
            version: (window.MathJax && window.MathJax.version) || null,
            script: script,
        };""")
    problems = []
    if state["math"] and not state["version"]:
        problems.append(f"{state['math']} equation(s) but MathJax did not run (script: {state['script']})")
    if state["script"]:
        src, here = urlparse(state["script"]), urlparse(driver.current_url)
        if (src.scheme, src.netloc) != (here.scheme, here.netloc):
            problems.append(f"MathJax loads from {state['script']}, not from the book")
    if state["unrendered"]:
        problems.append(f"{len(state['unrendered'])} equation(s) left as TeX: {state['unrendered'][:3]}")
    if state["errors"]:
        problems.append(f"TeX errors: {state['errors'][:3]}")
    text = _prose_text(driver)
    raw = RAW_TEX_DELIMITERS.findall(text) + RAW_MATH.findall(text)
    if raw:
        problems.append(f"raw TeX shown as text: {raw[:3]}")
    return problems


def glue_problems(driver) -> list[str]:
    """Glued values missing: a `{glue...}` role shown as text, a glued object shown by its repr
    (``<IPython.core.display.Markdown object>``), or myst-nb's glue warning on the page."""
    text = _prose_text(driver)
    problems = [f"unresolved glue shown as text: {match!r}" for match in UNRESOLVED_GLUE.findall(text)[:3]]
    problems += [f"glued object shown as its repr: {match!r}" for match in OBJECT_REPR.findall(text)[:3]]
    warnings = driver.execute_script("""
        return [...document.querySelectorAll('.system-message, .problematic')]
            .map(e => e.textContent.trim()).filter(t => /glue/i.test(t)).map(t => t.slice(0, 100));""")
    problems += [f"glue warning on the page: {w!r}" for w in warnings[:3]]
    return problems


def network_requests(driver) -> list[str]:
    """URLs the page requested since the last call that are not its own files (the log is drained)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if urlparse(url).scheme not in LOCAL_SCHEMES:
                urls.append(url)
    return urls


# ---- Every page of the built book ------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_page_reads_as_a_reader_needs(browser, page):
    _open(browser, page)
    _screenshot(browser, page)
    broken = browser.execute_script(
        "return [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert not broken, f"{page.name}: images that did not decode: {broken[:3]}"
    text = _prose_text(browser)
    assert not RAW_TABLE.search(text), f"{page.name}: a Markdown table is shown as raw text"
    stderr = browser.execute_script("return document.querySelectorAll('.output.stderr, .stderr').length")
    assert stderr == 0, f"{page.name}: {stderr} stderr/warning output areas"
    body = browser.execute_script("return document.body.innerText")
    assert not MACHINE_PATH.search(body), f"{page.name}: shows a machine path: {MACHINE_PATH.search(body).group(0)}"
    links = browser.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    here = Path(unquote(urlparse(browser.current_url).path)).parent  # index.html redirects to the first page
    missing = [href for href in links if not urlparse(href).scheme and not href.startswith("#")
               and not (here / unquote(urlparse(href).path)).exists()]
    assert not missing, f"{page.name}: in-book links to missing files: {missing[:5]}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_page_fits_the_column_renders_math_offline_and_glues_its_numbers(browser, page):
    network_requests(browser)  # drain what earlier pages left
    _open(browser, page)
    problems = {"requests to the network (offline book)": network_requests(browser),
                "equations": math_problems(browser),
                "glue": glue_problems(browser),
                "wider than the column at 1400 px": overflowing_blocks(browser)}
    report = "\n".join(f"  {kind}: {len(found)}\n" + "\n".join(f"    - {p}" for p in found[:8])
                       for kind, found in problems.items() if found)
    assert not report, f"{page.relative_to(HTML)}:\n{report}"


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


def test_book_serves_its_own_mathjax(browser):
    """The built book holds MathJax 3 and its pages point at it, not at a CDN."""
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").exists(), \
        "_build/html/_static/mathjax/ is missing: sphinx-mathjax-offline (pyproject `book` extra, _config.yml)"
    cdn = [p.relative_to(HTML) for p in PAGES if re.search(r"""src="https?://[^"]*mathjax""", p.read_text(), re.I)]
    assert not cdn, f"pages that load MathJax from the network: {cdn[:5]}"


# ---- Each check fails on a page with the defect (tiny synthetic pages) -----------------------------

def _page(tmp_path: Path, name: str, body: str, head: str = "") -> Path:
    path = tmp_path / f"{name}.html"
    path.write_text(f"""<!DOCTYPE html><html><head><meta charset="utf-8">{head}
<style>body {{ margin: 0; }} article {{ width: 600px; padding: 10px; }}
pre {{ overflow-x: auto; }} .wrap {{ overflow-x: auto; }}</style></head>
<body><article>{body}</article></body></html>""")
    return path


def _mathjax_script() -> Path:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("sphinx-mathjax-offline is not installed (`pip install -e .[book]`)")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "tex-chtml.js"


def _load(driver, page: Path) -> None:
    network_requests(driver)
    driver.get(page.as_uri())
    wait_for_math(driver)


def test_overflow_check_flags_a_wide_code_block_and_table(chrome, tmp_path):
    wide = "x = " + " + ".join(f"term_{i}" for i in range(60))
    cells = "".join(f"<td>column number {i}</td>" for i in range(40))
    _load(chrome, _page(tmp_path, "wide", f"""
        <div class="highlight"><pre>{wide}</pre></div>
        <pre>{wide}</pre>
        <div class="wrap"><table><tr>{cells}</tr></table></div>
        <details><summary>code</summary><div class="highlight"><pre>{wide}</pre></div></details>"""))
    problems = overflowing_blocks(chrome)
    assert len(problems) == 4, problems
    assert any("div.highlight" in p and "scrollWidth" in p for p in problems), problems
    assert any(p.startswith("table") for p in problems), problems

    _load(chrome, _page(tmp_path, "narrow", """
        <div class="highlight"><pre>x = 1</pre></div><pre>print(x)</pre>
        <div class="wrap"><table><tr><td>a</td><td>b</td></tr></table></div>"""))
    assert overflowing_blocks(chrome) == []


def test_math_check_flags_raw_tex_and_passes_packaged_mathjax_offline(chrome, tmp_path):
    body = r"""<p>Energy <span class="math notranslate nohighlight">\(E = mc^2\)</span> and</p>
        <div class="math notranslate nohighlight">\[\int_0^1 f(x)\, dx\]</div>"""
    _load(chrome, _page(tmp_path, "raw_dollars", r"<p>The loss $$\|\nabla W' - \nabla W\|^2$$ and $x^2$.</p>"))
    problems = math_problems(chrome)
    assert any("raw TeX" in p for p in problems), problems

    _load(chrome, _page(tmp_path, "no_mathjax", body))
    problems = math_problems(chrome)
    assert any("MathJax did not run" in p for p in problems), problems
    assert any("left as TeX" in p for p in problems), problems

    _load(chrome, _page(tmp_path, "cdn_mathjax", body,
                        head='<script async src="https://cdn.invalid/mathjax/tex-chtml.js"></script>'))
    assert any("MathJax did not run" in p for p in math_problems(chrome))
    assert network_requests(chrome) == ["https://cdn.invalid/mathjax/tex-chtml.js"]

    # The book's packaged MathJax renders the same page with the network cut.
    _load(chrome, _page(tmp_path, "packaged_mathjax", body,
                        head=f'<script async src="{_mathjax_script().as_uri()}"></script>'))
    assert math_problems(chrome) == []
    assert chrome.execute_script("return document.querySelectorAll('mjx-container').length") == 2
    assert network_requests(chrome) == []


def test_glue_check_flags_an_unresolved_glue(chrome, tmp_path):
    _load(chrome, _page(tmp_path, "glue", "<p>DLG reaches {glue:text}`dlg_psnr` dB.</p>"))
    assert glue_problems(chrome) == ["unresolved glue shown as text: '{glue:text}`dlg_psnr`'"]
    _load(chrome, _page(tmp_path, "repr", "<p>Verdict: <span>&lt;IPython.core.display.Markdown "
                        "object&gt;</span></p>"))
    assert glue_problems(chrome) == ["glued object shown as its repr: '<IPython.core.display.Markdown object>'"]
    _load(chrome, _page(tmp_path, "glue_warning", '<div class="system-message"><p>WARNING: No key '
                        "'dlg_verdict' found in glue data [mystnb.glue]</p></div>"))
    assert glue_problems(chrome) and "glue warning" in glue_problems(chrome)[0]
    _load(chrome, _page(tmp_path, "glued", '<p>DLG reaches <span class="pasted-text">31.2</span> dB; '
                        "<code>{glue:text}`key`</code> is how.</p>"))
    assert glue_problems(chrome) == []
