"""The evidence inspector page in a real headless browser: Debian's chromium driven by selenium through
Debian's chromedriver (nothing is downloaded), against a real server over the real CPU pipeline (the
learned evaluator on the tiny checkpoint, template generator) and real RAMDocs chunks.

``python3 dev.py test`` installs ``chromium`` and ``chromium-driver`` with apt-get when they are missing and
it runs as root; elsewhere these tests skip and say so.
"""

import json
import shutil

import httpx
import pytest

import evidential
from inference.answer import record_evidence
from inference.ramdocs import load_ramdocs
from inference.server.app import ServerConfig, create_app

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the dev extra; not installed")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="Debian's chromium and chromium-driver are not installed (python3 dev.py test installs them "
    "with apt-get when it runs as root)",
)

# a RAMDocs sample question whose documents disagree (two name the band, one plants another answer)
RECORD = next(r for r in load_ramdocs() if r["question"] == 'Who is the artist of the album "Crazy World"?')
CHUNKS = [
    {"id": f"doc{i + 1}", "text": d["text"], "source": "RAMDocs"} for i, d in enumerate(RECORD["documents"])
]


@pytest.fixture(scope="module")
def site(rag, serve):
    app = create_app(rag.config, ServerConfig(max_concurrency=1, max_queue=8), pipeline=rag)
    with serve(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,2000",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _renders(driver) -> int:
    return int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-renders") or 0)


def _wait_render(driver, after: int) -> None:
    def done(d):
        body = d.find_element(By.TAG_NAME, "body")
        return _renders(d) > after and body.get_attribute("data-pending") is None

    WebDriverWait(driver, 60).until(done, "the page did not render a record")


def _set(driver, selector: str, value) -> None:
    """Set an input's value as a user would, firing its input and change events."""
    driver.execute_script(
        "const e = document.querySelector(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event('input')); e.dispatchEvent(new Event('change'));",
        selector,
        str(value),
    )


def _ask_on_page(driver, site: str) -> None:
    driver.get(site + "/")
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    driver.find_element(By.ID, "question").send_keys(RECORD["question"])
    _set(driver, "#chunks", "\n".join(json.dumps(c) for c in CHUNKS))
    before = _renders(driver)
    driver.find_element(By.ID, "ask-button").click()
    _wait_render(driver, before)


def _shown(driver) -> dict:
    rows = driver.find_elements(By.CSS_SELECTOR, "#claims tr.claim-row")
    return {
        "route": driver.find_element(By.ID, "route").text.lower(),
        "claims": {r.get_attribute("data-claim"): float(r.get_attribute("data-mass")) for r in rows},
        "u": float(driver.find_element(By.ID, "u-value").get_attribute("data-value")),
        "cited": [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#cited-ids .chip")],
        "cited_cards": [
            c.get_attribute("data-chunk")
            for c in driver.find_elements(By.CSS_SELECTOR, "#chunk-list .chunk.cited")
        ],
        "cards": [
            c.get_attribute("data-chunk") for c in driver.find_elements(By.CSS_SELECTOR, "#chunk-list .chunk")
        ],
        "response": driver.find_element(By.ID, "response").text,
    }


def test_the_page_shows_the_answer_record_of_a_real_question(site, browser, tmp_path):
    _ask_on_page(browser, site)
    shown = _shown(browser)
    rec = httpx.post(
        f"{site}/ask", json={"question": RECORD["question"], "chunks": CHUNKS}, timeout=60
    ).json()
    assert shown["route"] == rec["route"]
    assert shown["claims"] == {c["text"]: c["mass"] for c in rec["claims"]}
    assert sum(shown["claims"].values()) + shown["u"] == pytest.approx(1.0, abs=1e-4)
    assert shown["u"] == pytest.approx(rec["uncertainty"], abs=1e-9)
    assert shown["cited"] == rec["cited_chunk_ids"] and shown["cited_cards"] == rec["cited_chunk_ids"]
    assert shown["cards"] == [c["id"] for c in CHUNKS]  # rank order
    assert shown["response"] == rec["response"]
    # the chunk texts the page was given are shown with each chunk's evidence
    first = browser.find_element(By.CSS_SELECTOR, "#chunk-list .chunk .text").text
    assert first.startswith(CHUNKS[0]["text"][:40])
    assert browser.find_element(By.ID, "u-ignorance").text == f"{rec['ignorance']:.4f}"
    assert browser.find_element(By.ID, "u-conflict").text == f"{rec['conflict']:.4f}"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#steps .step")) == len(rec["step_conflict"])
    png = tmp_path / "inspector.png"
    assert browser.save_screenshot(str(png)) and png.stat().st_size > 20_000


def test_changing_lambda_on_the_page_reroutes_as_evidential_fuse_says(site, browser):
    _ask_on_page(browser, site)
    rec = httpx.post(
        f"{site}/ask", json={"question": RECORD["question"], "chunks": CHUNKS}, timeout=60
    ).json()
    ops = evidential.opinions_from_evidence(record_evidence(rec))
    u = {lam: float(evidential.fuse(ops, lam=lam).uncertainty) for lam in (0.0, 1.0)}
    assert u[1.0] > u[0.0] + 1e-3, f"these chunks must conflict for λ to matter: {u}"
    tau1, tau2 = (u[0.0] + u[1.0]) / 2, 0.999
    for selector, value in (("#refuse-tau1", tau1), ("#refuse-tau2", tau2)):
        before = _renders(browser)
        _set(browser, selector, value)
        _wait_render(browser, before)
    for lam in (0.0, 1.0, 0.0):
        before = _renders(browser)
        _set(browser, "#refuse-lam", lam)
        _wait_render(browser, before)
        expected = evidential.route(evidential.fuse(ops, lam=lam), tau1, tau2).names
        shown = _shown(browser)
        assert shown["route"] == expected, (lam, shown, u)
        assert shown["u"] == pytest.approx(u[lam], abs=1e-5)
        assert sum(shown["claims"].values()) + shown["u"] == pytest.approx(1.0, abs=1e-4)
        assert browser.find_element(By.ID, "refused-note").is_displayed()
    assert {evidential.route(evidential.fuse(ops, lam=x), tau1, tau2).names for x in (0.0, 1.0)} == {
        "direct",
        "conflict",
    }


def test_the_page_browses_a_jsonl_of_answer_records(site, browser, tmp_path):
    ask = {"question": RECORD["question"], "chunks": CHUNKS}
    right = httpx.post(f"{site}/ask", json=ask, timeout=60).json()
    abstained = httpx.post(f"{site}/ask", json={**ask, "tau1": 0.0, "tau2": 1e-6}, timeout=60).json()
    path = tmp_path / "rows.jsonl"
    rows = [
        {"id": "q1", "record": right, "scores": {"accuracy": 1.0}},  # an evaluate row, judged correct
        {"id": "q2", "record": abstained, "scores": {"accuracy": 0.0}},
        abstained,  # a plain answer record (batch), not judged
        {"not": "a record"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    browser.get(site + "/")
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
    )
    browser.find_element(By.ID, "records-file").send_keys(str(path))
    WebDriverWait(browser, 30).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#records tbody tr")) == 3
    )
    assert "skipped 1 line" in browser.find_element(By.ID, "error").text
    _set(browser, "#filter-route", "abstain")
    assert [
        r.get_attribute("data-line") for r in browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    ] == ["2", "3"]
    _set(browser, "#filter-correct", "incorrect")
    rows_shown = browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    assert [r.get_attribute("data-line") for r in rows_shown] == ["2"]
    before = _renders(browser)
    rows_shown[0].click()
    _wait_render(browser, before)
    assert _shown(browser)["route"] == "abstain"
    _set(browser, "#filter-route", "")
    _set(browser, "#filter-correct", "correct")
    rows_shown = browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    assert [r.get_attribute("data-line") for r in rows_shown] == ["1"]
    before = _renders(browser)
    rows_shown[0].click()
    _wait_render(browser, before)
    assert _shown(browser)["route"] == right["route"]


def test_the_page_asks_against_the_servers_index(rag, ramdocs_index, ramdocs_records, serve, browser):
    from inference.rag.evidential import EvidentialRAG

    path, _, _ = ramdocs_index
    indexed = EvidentialRAG(rag.config, path, evaluator=rag.evaluator, generator=rag.generator)
    app = create_app(indexed.config, ServerConfig(), pipeline=indexed)
    question = ramdocs_records[0]["question"]
    with serve(app) as url:
        browser.get(url + "/")
        WebDriverWait(browser, 30).until(
            lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
        )
        assert "index" in browser.find_element(By.ID, "server-status").text
        browser.find_element(By.ID, "question").send_keys(question)
        before = _renders(browser)
        browser.find_element(By.ID, "ask-button").click()  # no chunks pasted: the server retrieves
        _wait_render(browser, before)
        rec = httpx.post(
            f"{url}/ask", json={"question": question, "include_chunk_text": True}, timeout=60
        ).json()
        assert rec["retrieval"]["retrieved"] and len(rec["retrieval"]["chunks"]) == indexed.config.k
        shown = _shown(browser)
        assert shown["cards"] == [c["id"] for c in rec["retrieval"]["chunks"]]
        assert shown["route"] == rec["route"] and shown["claims"] == {
            c["text"]: c["mass"] for c in rec["claims"]
        }
        texts = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#chunk-list .chunk .text")]
        assert [t[:30] for t in texts] == [c["text"][:30] for c in rec["retrieval"]["chunks"]]
