"""What an open page costs, in a real headless Chromium: a page open through many store versions
fetches itself at most once per version, a reload with nothing changed gets 304s, and a replay's
turn and seat live in its address. Chrome's own network log counts the requests."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from arena.serve.cache import tag
from arena.store import reads
from arena.tournament.config import TournamentConfig
from arena.tournament.run import run_tournament
from arena.tournament.store import Store

from .fakes import policy_launcher
from .test_serve import ServerProc, build_store, fake_record
from .test_serve_browser import CHROMEDRIVER, CHROMIUM, DESKTOP, wait

webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium (in the test extra)")

VERSIONS = 10  # enough to see a page keep up and never fetch a version twice (a page that fetches each
#                version twice, or on every event, passes VERSIONS); each costs a poll


@pytest.fixture(scope="module")
def chrome():
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver): "
                    "arena serve is not tested in a browser")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={DESKTOP[0]},{DESKTOP[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A store with the test ladder and two real games (played in-process), served read-only."""
    store = tmp_path_factory.mktemp("live") / "data" / "arena.sqlite"
    build_store(store)
    cfg = TournamentConfig(name="real", bots=["lowest", "highest"], deals=1, store=str(store))
    trio.run(lambda: run_tournament(cfg, Store(cfg.store), launcher=policy_launcher()))
    db = Store(store)  # a name with no place to break, as people name their club nights
    db.begin_tournament("thursday-club-night-round-robin-of-every-bot-submitted-this-term", {"format": "rr"}, 10)
    club = [f"member-{i:02d}@1.0" for i in range(20)]  # a club's ladder: every pair has played once
    db.begin_tournament("ladder:club:batch-0001", {"format": "batch"}, 190)
    for k, (a, b) in enumerate((a, b) for i, a in enumerate(club) for b in club[i + 1:]):
        db.save_game("ladder:club:batch-0001", k, [a, b], fake_record(f"club-{k}", [a, b], [[k % 2], [1 - k % 2]]))
    db.close()
    # 50 versions in seconds, not the default settle's minute; the store looked at every 0.05 s (the
    # last --poll given is the one taken), so each version reaches the page without a 0.2 s wait
    server = ServerProc(store, "--settle", "0.1", "--poll", "0.05")
    server.store = store  # type: ignore[attr-defined]
    yield server
    server.stop()


def network(driver: Any) -> list[dict[str, Any]]:
    """Chrome's network events since the last call: (method, params)."""
    return [json.loads(e["message"])["message"] for e in driver.get_log("performance")]


def on_the_wire(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(URL, status) of each response that went over the network (not from the browser's cache),
    the live stream left out."""
    urls: dict[str, str] = {}
    out = []
    for e in events:
        if e["method"] == "Network.requestWillBeSent":
            urls[e["params"]["requestId"]] = e["params"]["request"]["url"]
        elif e["method"] == "Network.responseReceivedExtraInfo":
            url = urls.get(e["params"]["requestId"])  # None: sent before these events began
            if url is not None and not url.endswith("/events"):
                out.append((url, e["params"]["statusCode"]))
    return out


# Counts the page's fetches, before its own scripts run: __fetches every call, __inflight those not
# yet read to the end (a fetch that fails, or answers other than ok, ends there; live.js reads an ok
# answer's text and only then, in the same turn of the loop, may start its next fetch), so a test
# that reads __inflight == 0 knows every fetch the page began has been answered and none is queued.
# __news is the last store event the page heard.
COUNT_FETCHES = """
window.__fetches = 0; window.__inflight = 0;
(function () {
  var fetch = window.fetch, text = Response.prototype.text;
  function done() { window.__inflight -= 1; }
  window.fetch = function () {
    window.__fetches += 1; window.__inflight += 1;
    var answer = fetch.apply(this, arguments);
    answer.then(function (r) { if (!r.ok) done(); }, done);
    return answer;
  };
  Response.prototype.text = function () {
    var read = text.call(this);
    if (this.ok) read.then(done, done);
    return read;
  };
  var Source = window.EventSource;  // the last store event the page heard, read before its own handler
  window.EventSource = function (url, options) {
    var source = new Source(url, options);
    source.addEventListener("store", function (e) { window.__news = JSON.parse(e.data); });
    return source;
  };
  window.EventSource.prototype = Source.prototype;
})();
"""


@pytest.fixture
def counted(chrome):
    """The module's Chromium with COUNT_FETCHES in every page it opens during the test."""
    script = chrome.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COUNT_FETCHES})
    network(chrome)  # another test's requests are not this one's
    yield chrome
    chrome.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})


def settled(chrome) -> list[dict[str, Any]]:
    """Wait until every fetch the page began is answered and read, and Chrome's log holds each of
    their answers; return the log's events since the last read."""
    events: list[dict[str, Any]] = []

    def answered(d: Any) -> bool:
        events.extend(network(d))
        seen: dict[str, set[str]] = {}
        for e in events:
            if "requestId" in e.get("params", {}):
                seen.setdefault(e["params"]["requestId"], set()).add(e["method"].removeprefix("Network."))
        asked = {e["params"]["requestId"] for e in events if e["method"] == "Network.requestWillBeSent"
                 and e["params"]["request"]["url"].startswith("http")  # a file:// page logs no status
                 and not e["params"]["request"]["url"].endswith("/events")}
        # ended, and its answer's status logged (on_the_wire reads it) unless the cache answered
        heard = {r for r in asked if seen[r] & {"loadingFinished", "loadingFailed"}
                 and seen[r] & {"responseReceivedExtraInfo", "requestServedFromCache"}}
        return d.execute_script("return window.__inflight") == 0 and asked == heard
    wait(chrome, answered, what="the page's fetches answered")
    return events


def _store_games_and_watch(chrome, db: Store, tid: str, seats: list[str], n: int, first: int) -> list[dict[str, Any]]:
    """Store ``n`` games, each only once the open page has learnt of the one before; return Chrome's
    network log from then until every fetch the page began has been answered."""
    games = db.db.execute("SELECT COUNT(*) FROM games").fetchone()[0]
    events: list[dict[str, Any]] = []
    for k in range(n):
        db.save_game(tid, first + k, seats, fake_record(f"{tid}-{first + k}", seats, [[k % 2], [1 - k % 2]]))
        games += 1
        # the page learns of each version before the next is stored (the poller looks every 0.05 s);
        # an event starts its fetch in the same turn that sets the count, so none is missed below
        wait(chrome, lambda d: events.extend(network(d)) or
             d.find_element("tag name", "body").get_attribute("data-store-games") == str(games),
             what=f"game {k} of {tid}")
    # the pages' version moves at most once a settle, so the event that moves it to the last game's
    # may come after that game's news: wait for it (the page's fetch for it starts as it is heard)
    final = tag(reads.counts(db.db))
    wait(chrome, lambda d: events.extend(network(d)) or
         d.execute_script("return window.__news && window.__news.version") == final, what="the last version's event")
    return events + settled(chrome)


@pytest.mark.parametrize("path,seats,first", [("/ladders/test-ladder", ["alpha@1.0", "beta@2.0"], 1000),
                                              ("/bots/beta@2.0", ["beta@2.0", "gamma@1.0"], 2000)])
def test_a_page_open_through_many_versions_fetches_each_part_at_most_once_per_version(
        counted, site, path: str, seats: list[str], first: int) -> None:
    """A ladder's page and a bot's page open while VERSIONS games it shows are stored: every request the
    page makes (itself, which carries its live parts and the chart drawn in it, or anything else)
    is made at most once per version; then games it does not show move nothing it fetches, or
    only to a 304 (a bot's page follows the store's version, a ladder's page its ladder's)."""
    chrome = counted
    url = site.url + path
    chrome.get(url)
    wait(chrome, lambda d: d.find_element("id", "live-status").text == "live", what="the live stream")
    settled(chrome)
    db = Store(site.store)
    try:
        wire = on_the_wire(_store_games_and_watch(chrome, db, "ladder:test-ladder:seed", seats, VERSIONS, first))
        fetched = Counter(u for u, _ in wire)
        assert set(fetched) == {url}, fetched  # the page alone: no part, JSON or file fetched apart from it
        assert VERSIONS // 5 <= fetched[url] <= VERSIONS  # it kept up, and never fetched one version twice
        assert int(chrome.find_element("tag name", "body").get_attribute("data-refreshes") or 0) <= VERSIONS
        # games of another ladder and other bots: news to the store, not to this page
        fetches = chrome.execute_script("return window.__fetches")
        after = on_the_wire(_store_games_and_watch(chrome, db, "ladder:club:batch-0001",
                                                   ["member-00@1.0", "member-01@1.0"], 3, first))
    finally:
        db.close()
    if path.startswith("/ladders/"):  # it follows its own ladder's version: not even a revalidation
        assert after == [] and chrome.execute_script("return window.__fetches") == fetches
    else:
        assert all(status == 304 for _, status in after), after


@pytest.mark.parametrize("path", ["/ladders/test-ladder", "/bots/alpha@1.0", "/games", "/"])
def test_a_reload_with_nothing_changed_gets_304s(counted, site, path: str) -> None:
    chrome = counted
    url = site.url + path
    chrome.get(url)
    wait(chrome, lambda d: d.execute_script("return document.readyState") == "complete", what="loaded")
    settled(chrome)
    chrome.refresh()
    # loaded: every file the page holds was asked for; then each request it began (its own, its files,
    # any fetch of its scripts) answered and logged, however late its event comes on a loaded machine
    wait(chrome, lambda d: d.execute_script("return document.readyState") == "complete", what="reloaded")
    wire = on_the_wire(settled(chrome))
    assert wire == [(url, 304)], wire  # the page revalidated; its hashed files came from the cache


def test_a_replays_turn_and_seat_are_in_its_address(chrome, site) -> None:
    db = Store(site.store)
    gid = db.db.execute("SELECT id FROM games WHERE tournament='real' ORDER BY idx").fetchone()[0]
    db.close()
    base = f"{site.url}/games/{gid}"
    chrome.get(base)
    wait(chrome, lambda d: d.find_element("tag name", "body").get_attribute("data-turn") == "0", what="replay")
    chrome.find_element("id", "next").click()
    chrome.find_element("id", "next").click()
    assert chrome.execute_script("return location.hash") == "#t2"
    from selenium.webdriver.support.ui import Select
    Select(chrome.find_element("id", "view")).select_by_value("1")
    assert chrome.execute_script("return location.hash") == "#t2/s1"
    chrome.get("about:blank")
    chrome.get(base + "#t5/s0")  # a link to move 5 as seat 0 sees it
    wait(chrome, lambda d: d.find_element("tag name", "body").get_attribute("data-turn") == "5", what="turn 5")
    assert chrome.find_element("id", "replay").get_attribute("data-view") == "0"
    chrome.get("about:blank")
    chrome.get(base + "#t999999/s7")  # past the end, a seat the game has not: the last turn, everyone's view
    last = wait(chrome, lambda d: d.find_element("tag name", "body").get_attribute("data-turn"), what="restored")
    assert int(last) > 5 and chrome.find_element("id", "replay").get_attribute("data-view") == "all"


def test_no_page_scrolls_sideways_on_a_phone(chrome, site) -> None:
    db = Store(site.store)
    gid = db.db.execute("SELECT id FROM games WHERE tournament='real' ORDER BY idx").fetchone()[0]
    db.close()
    pages = ["/", "/ladders/test-ladder", "/ladders/club", "/tournaments/real", "/bots/alpha@1.0", "/games", f"/games/{gid}",
             "/no-such-page"]
    chrome.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        wide = {}
        for path in pages:
            chrome.get(site.url + path)
            wait(chrome, lambda d: d.execute_script("return document.readyState") == "complete", what=path)
            # a mobile browser widens its layout to fit a wide page (then zooms out), so the
            # page's width is held to the phone's, not to innerWidth
            scroll = chrome.execute_script("return document.documentElement.scrollWidth")
            if scroll != 390:
                wide[path] = scroll
        assert wide == {}
    finally:
        chrome.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_head_to_head_map_of_twenty_bots_is_readable_on_a_phone(chrome, site) -> None:
    chrome.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        chrome.get(site.url + "/ladders/club")
        wait(chrome, lambda d: d.find_elements("css selector", "#heat-map .cell-text"), what="the map")
        digits, page = chrome.execute_script(
            "return [document.querySelector('#heat-map .cell-text').getBoundingClientRect().height,"
            " document.documentElement.scrollWidth]")
        assert digits >= 8.5 and page == 390  # the map scrolls in its own box, the page does not
    finally:
        chrome.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_a_rating_interval_is_reachable_by_tap(chrome, site) -> None:
    chrome.get(site.url + "/ladders/test-ladder")
    series = wait(chrome, lambda d: d.find_elements("css selector", "#rating-chart .series"), what="the chart")[0]
    band = "return getComputedStyle(arguments[0].querySelector('.band')).opacity"
    assert float(chrome.execute_script(band, series)) == 0
    chrome.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", series)
    note = chrome.find_element("id", "rating-chart-note").text
    assert " to " in note and "games" in note and series.get_attribute("data-bot") in note
    wait(chrome, lambda d: float(d.execute_script(band, series)) > 0, what="the band shown")
    chrome.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", series)
    assert chrome.find_element("id", "rating-chart-note").text == ""


def test_arena_report_html_reads_whole_on_a_phone(chrome, site, tmp_path: Path) -> None:
    """`arena report --html` looks like the server's pages, so it is held to them: at 390 px its
    wide tables scroll in their own boxes and the page, with a replay open, does not scroll sideways."""
    from typer.testing import CliRunner

    from arena.cli.main import app
    report = tmp_path / "report.html"
    done = CliRunner().invoke(app, ["report", "real", "--store", str(site.store), "--html", str(report)])
    assert done.exit_code == 0, done.output
    gid = report.read_text().split('data-game="', 1)[1].split('"', 1)[0]
    chrome.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        chrome.get(report.as_uri())
        wait(chrome, lambda d: d.find_elements("id", "standings"), what="the report")
        assert chrome.execute_script("return document.documentElement.scrollWidth") == 390
        chrome.get(f"{report.as_uri()}#game={gid}")
        wait(chrome, lambda d: d.find_element("tag name", "body").get_attribute("data-turn"), what="its replay")
        assert chrome.execute_script("return document.documentElement.scrollWidth") == 390
    finally:
        chrome.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


HOSTILE_LADDER = "x<img src=x onerror=window.__pwned=2>"


@pytest.mark.parametrize("ladder", ["test-ladder", HOSTILE_LADDER])
def test_a_ladder_page_shows_a_new_game_from_its_event_alone(chrome, site, ladder: str) -> None:
    """The count and the result come in the event: with the page's own fetch never answered (as
    behind a flood of clients, waiting for the standings' build), a ladder's page still shows the
    new game. A bot's label and a ladder's name are anyone's text: shown as text, never run."""
    from urllib.parse import quote

    from .test_serve import HOSTILE
    db = Store(site.store)
    tid = f"ladder:{ladder}:batch-news"
    db.begin_tournament(tid, {"format": "batch", "rules": "classic", "seats": 2}, 4)
    if ladder == HOSTILE_LADDER:  # the ladder's page exists once it has a game
        db.save_game(tid, 0, ["alpha@1.0", "beta@2.0"], fake_record(f"{tid}-0", ["alpha@1.0", "beta@2.0"], [[0], [1]]))
    # The page's fetch never answers from its very start: an event for the writes above may still
    # be on its way when the page opens, and a fetch it started would replace the count's element.
    blocker = chrome.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {
        "source": "window.__pwned = 0; window.fetch = function () { return new Promise(function () {}); };"})
    try:
        chrome.get(f"{site.url}/ladders/{quote(ladder, safe='')}")
        wait(chrome, lambda d: d.find_element("id", "live-status").text == "live", what="the live stream")
        seats = [HOSTILE, "alpha@1.0"]
        db.save_game(tid, 1, seats, fake_record(f"{tid}-1 <b>", seats, [[1], [0]]))
        games = db.db.execute("SELECT COUNT(*) FROM games WHERE tournament LIKE ?", (f"ladder:{ladder}:%",)).fetchone()[0]
        wait(chrome, lambda d: d.find_element("id", "ladder-games").text == f"{games} games", what="the count")
        shown = f"1st alpha@1.0 \u00b7 2nd {HOSTILE}"
        item = wait(chrome, lambda d: [a for a in d.find_elements("css selector", "#ladder-latest li a")[:1]
                                       if a.text == shown], what="the result")[0]
        assert item.get_attribute("href") == f"{site.url}/games/{quote(f'{tid}-1 <b>', safe='')}"
        assert chrome.execute_script("return [window.__pwned, document.querySelectorAll("
                                     "'#ladder-latest script, #ladder-latest b, img[src=x]').length]") == [0, 0]
        assert chrome.find_element("tag name", "body").get_attribute("data-refreshes") is None  # no fetch came back
    finally:
        chrome.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": blocker["identifier"]})
        db.close()


def test_news_alone_fetches_nothing(counted, tmp_path) -> None:
    """An event that brings only news (a game stored while the settle holds the pages' version)
    fetches nothing: the page shows the count from it, and the version it would fetch is the one it
    holds (or one already being fetched). A page opened after the version's move knows no version
    from an event yet, so a fetch on the news would fetch its own page again."""
    chrome = counted
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--settle", "3600", "--poll", "0.05")  # the first change moves it; then an hour's hold
    db = Store(store)
    try:
        tid, seats = "ladder:test-ladder:news", ["alpha@1.0", "beta@2.0"]
        db.begin_tournament(tid, {"format": "batch", "rules": "classic", "seats": 2}, 4)
        url = f"{server.url}/ladders/test-ladder"
        chrome.get(url)
        wait(chrome, lambda d: d.find_element("id", "live-status").text == "live", what="the live stream")
        db.save_game(tid, 0, seats, fake_record(f"{tid}-0", seats, [[0], [1]]))  # the batch's start moved it: held now
        total = str(db.db.execute("SELECT COUNT(*) FROM games").fetchone()[0])
        wait(chrome, lambda d: d.find_element("tag name", "body").get_attribute("data-store-games") == total,
             what="the game's event")
        chrome.get(url)  # its first event will be news alone (its count, kept with the version, lags the news)
        wait(chrome, lambda d: d.find_element("id", "live-status").text == "live", what="the live stream again")
        events = settled(chrome)
        fetches = chrome.execute_script("return window.__fetches")
        for k in (1, 2):
            db.save_game(tid, k, seats, fake_record(f"{tid}-{k}", seats, [[k % 2], [1 - k % 2]]))
            games = db.db.execute("SELECT COUNT(*) FROM games WHERE tournament LIKE 'ladder:test-ladder:%'").fetchone()[0]
            wait(chrome, lambda d: d.find_element("id", "ladder-games").text == f"{games} games", what=f"news {k}")
        # the event that shows the count starts any fetch of its own in the same turn: none began
        assert chrome.execute_script("return window.__fetches") == fetches
        events = settled(chrome)
        assert on_the_wire(events) == []
    finally:
        db.close()
        server.stop()
