"""The web page in headless Chromium (Debian's chromium + chromium-driver, through Selenium) on a server that
asks for a token: the page says so, takes one, then classifies a text, clusters, mines phrase topics and trains
a new classifier with the bundled MiniLM; screenshots are kept under test-artifacts/."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from contrastext.serve.auth import new_token
from contrastext.serve.config import ServeConfig
from serve_harness import free_port, running_app

pytestmark = [pytest.mark.integration, pytest.mark.ray, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
TOKEN, ENTRY = new_token("web-user", "train")  # train: the page also creates a classifier



def _type_into(browser, element_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    field = browser.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)

@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("headless Chromium is not installed (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1100,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def app(ray_session, tmp_path_factory):
    # the replicas take a quarter CPU each, so the training worker and its data tasks find CPUs
    config = ServeConfig(port=free_port(),
                         models={"minilm": {"num_cpus": 0.25, "torch_threads": 1, "max_length": 128}},
                         topics={"num_cpus": 0.25, "torch_threads": 1, "k_max": 6},
                         classifiers={"storage_path": str(tmp_path_factory.mktemp("registry")), "batch_size": 4,
                                      "cpus_per_worker": 1, "num_cpus": 0.25})
    os.environ["CONTRASTEXT_API_TOKENS"] = ENTRY  # read when the application is built
    try:
        with running_app(config) as url:
            yield url
    finally:
        del os.environ["CONTRASTEXT_API_TOKENS"]


def test_page_asks_for_a_token_then_classifies_a_text(browser, app):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(app)
    wait = WebDriverWait(browser, 60)
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "needs an API token"))
    _type_into(browser, "token", TOKEN + Keys.TAB)  # kept for the tab: the later tests' page loads reuse it
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "ready"))
    assert "minilm" in browser.find_element(By.ID, "model").text
    _type_into(browser, "classify-texts", "The striker scored twice and his team won the championship final.")
    _type_into(browser, "classify-labels", "Sports, Business, Science")
    browser.find_element(By.ID, "classify-run").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#classify-table .predicted")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#classify-table .classify-row")
    assert len(rows) == 1
    assert rows[0].find_element(By.CLASS_NAME, "predicted").text == "Sports"
    assert "Business" in rows[0].text and "Science" in rows[0].text  # every label's score is shown
    assert browser.find_element(By.ID, "classify-error").text == ""

    # clustering the page's example documents draws one point per document
    browser.find_element(By.ID, "cluster-run").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#cluster-scatter circle")))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#cluster-scatter circle")) == 9

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "serve_page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_page_mines_phrase_topics(browser, app):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(app)
    wait = WebDriverWait(browser, 120)
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "ready"))
    assert "uctopic" in browser.find_element(By.ID, "topics-model").text
    documents = [line for line in browser.find_element(By.ID, "topics-texts").get_property("value").split("\n")
                 if line.strip()]
    browser.find_element(By.ID, "topics-run").click()  # the page's example documents, n_topics auto
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#topics-table .topic-row")))
    assert browser.find_element(By.ID, "topics-error").text == ""
    rows = browser.find_elements(By.CSS_SELECTOR, "#topics-table .topic-row")
    assert 2 <= len(rows) <= 6  # the configured k range
    assert all(row.find_element(By.CLASS_NAME, "topic-phrases").text for row in rows)  # top phrases per topic
    # every document is shown with its phrases marked by topic
    shown = browser.find_elements(By.CSS_SELECTOR, "#topics-docs .topic-doc")
    assert len(shown) == len(documents)
    marks = browser.find_elements(By.CSS_SELECTOR, "#topics-docs mark.phrase")
    assert len(marks) >= len(documents)
    assert {int(m.get_attribute("data-topic")) for m in marks} <= set(range(len(rows)))
    plain = browser.execute_script(  # each document's text with the topic numbers after its marks left out
        "return Array.from(document.querySelectorAll('#topics-docs .topic-doc')).map((d) => Array.from("
        "d.childNodes).map((n) => n.nodeType === 3 ? n.textContent : n.firstChild.textContent).join(''));")
    assert plain == documents

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "serve_topics.png"
    panel = browser.find_element(By.ID, "topics-panel")
    browser.execute_script("arguments[0].scrollIntoView();", panel)
    assert panel.screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_page_trains_a_classifier_and_tries_it(browser, app):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(app)
    wait = WebDriverWait(browser, 60)
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "ready"))
    assert browser.find_element(By.ID, "classifier-run").is_enabled()
    _type_into(browser, "classifier-name", "web-news")
    _type_into(browser, "classifier-labels", "Sports, Business, Technology")
    browser.find_element(By.ID, "classifier-run").click()  # the page's example texts, 1 round
    state = "const e = document.getElementById('classifier-state'); return e ? e.dataset.state : null;"
    seen = set()  # the status line is redrawn on every poll: read it by script, not by a held element

    def finished(b) -> bool:
        seen.add(b.execute_script(state))
        return seen & {"ready", "failed"}

    WebDriverWait(browser, 600, poll_frequency=0.2).until(finished)
    assert browser.execute_script(state) == "ready", browser.find_element(By.ID, "classifier-status").text
    assert "running" in seen or "queued" in seen  # the rounds were watched, not only the end
    assert browser.find_element(By.ID, "classifier-error").text == ""
    (round_row,) = browser.find_elements(By.CSS_SELECTOR, "#classifier-rounds-table .classifier-round")
    assert all(label in round_row.text for label in ("Sports", "Business", "Technology"))  # kept per label

    assert browser.find_element(By.ID, "classifier-try").is_displayed()
    browser.find_element(By.ID, "classifier-try-run").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#classifier-table .predicted")))
    assert browser.find_element(By.ID, "classifier-try-error").text == ""
    (row,) = browser.find_elements(By.CSS_SELECTOR, "#classifier-table .classifier-row")
    assert row.find_element(By.CLASS_NAME, "predicted").text in ("Sports", "Business", "Technology")

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "serve_classifier.png"
    panel = browser.find_element(By.ID, "classifier-panel")
    browser.execute_script("arguments[0].scrollIntoView();", panel)
    assert panel.screenshot(str(shot)) and shot.stat().st_size > 10_000
