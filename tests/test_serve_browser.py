"""``arena serve`` in a real headless Chromium (Selenium + Debian's chromium-driver).

The tests start ``arena serve`` on a free port over a store they build (a ladder of synthetic
games with known numbers and rating snapshots, and a real tournament of the bundled bots' policies,
played in this process), then drive the pages as a person would. With ``$ARENA_SCREENSHOTS`` set, each page
is photographed at 1366x768 (and a few at phone width) into that folder: ``docs/take-screenshots``
sets it to ``docs/screenshots/``, which the README links to. Without it no picture is taken (no
test reads them; 18 captures, each a PNG encoded by Chromium, and three 0.3 s waits for a phone
layout were the suite's work for a temporary folder nobody opened).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

import trio

from arena.tournament.config import TournamentConfig
from arena.tournament.run import run_tournament
from arena.tournament.store import Store
from tests.checks import arena_here, fixed_secret
from tests.fakes import policy_launcher

from .test_serve import (HOSTILE, LADDER, LADDER_BOTS, MS_PER_DECISION, ROOT, SNAPSHOTS, ServerProc,
                         build_store, expected_ladder)

webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium (in the test extra)")
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

SHOTS = os.environ.get("ARENA_SCREENSHOTS")
DESKTOP = (1366, 768)
PHONE = (390, 844)


def _exe(*names: str) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


CHROMIUM = _exe("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER = _exe("chromedriver", "chromium-driver")


def start_chromium() -> Any:
    """Headless Chromium under chromedriver at the desktop size (tests/conftest.py shares one per
    test process); skips where neither is installed."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver): "
                    "arena serve is not tested in a browser")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={DESKTOP[0]},{DESKTOP[1]}", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture(scope="module")
def chrome(shared_chromium):
    """The process's Chromium for this module: every cookie of another module's servers cleared
    (they share the host 127.0.0.1), at the desktop size, photographing into $ARENA_SCREENSHOTS if set."""
    driver = shared_chromium
    driver.get("about:blank")
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    viewport(driver, *DESKTOP)
    driver.shots = Path(SHOTS) if SHOTS else None
    yield driver
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})


def viewport(driver: Any, width: int, height: int, mobile: bool = False) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})


def shot(driver: Any, name: str, phone: bool = False) -> None:
    """Photograph the page as it is now into the shots folder as NAME.png (NAME-phone.png at phone
    width); nothing where no folder was asked for."""
    if driver.shots is None:
        return
    try:
        driver.shots.mkdir(parents=True, exist_ok=True)
        if phone:
            viewport(driver, *PHONE, mobile=True)
            time.sleep(0.3)
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(driver.shots / f"{name}{'-phone' if phone else ''}.png"))
    except OSError:
        pass  # a read-only checkout: the test still ran
    finally:
        if phone:
            viewport(driver, *DESKTOP)


def wait(driver: Any, cond, timeout: float = 60, what: str = "") -> Any:
    def safe(d: Any) -> Any:
        try:
            return cond(d)
        except (StaleElementReferenceException, WebDriverException):
            return None
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(safe, what)


def wait_in_page(driver: Any, check: str, *args: Any, timeout: float = 60, what: str = "") -> Any:
    """What ``check`` (a script's body, reading ``arguments`` as ``args``) returns once it returns
    something other than null, looked at every 10 ms by the page itself: one WebDriver round trip a
    wait, where :func:`wait` asks from here every tenth of a second (up to a tenth of a second late,
    and three or four round trips a turn of a game played by clicking)."""
    from selenium.common.exceptions import TimeoutException
    script = ("var done = arguments[arguments.length - 1], args = Array.prototype.slice.call(arguments, 0, -1);\n"
              "function check() {\n" + check + "\n}\n"
              "(function look() { var got = null; try { got = check.apply(null, args); } catch (e) {}"
              " if (got === null || got === undefined) setTimeout(look, 10); else done(got); })();")
    deadline = time.monotonic() + timeout
    while True:
        driver.set_script_timeout(max(deadline - time.monotonic(), 0.1))
        try:
            return driver.execute_async_script(script, *args)
        except TimeoutException:
            raise AssertionError(f"waited {timeout} s for {what or 'the page'}") from None
        except WebDriverException as e:  # the page it looked at was replaced by the next: look at that one
            if "unloaded" not in str(e) or time.monotonic() > deadline:
                raise


def css(driver: Any, selector: str) -> list[Any]:
    return driver.find_elements(By.CSS_SELECTOR, selector)


# one_seat_per_author = false: the site's store becomes a club's when its first admin signs up, which
# would turn the rule on; the organiser's own uploads here share tables as before
MINI_LADDER = """description = "A small test ladder"
rules = "powers"
seats = 2
deals = 1
bots = ["random", "lowest"]
check_games = 1
one_seat_per_author = false
[time]
move_ms = 2000
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("site")
    store = base / "data" / "arena.sqlite"
    # the same deals every run: a game played in the browser is dealt from the store's secret and
    # its seed, and on a fresh random secret the clicked game's length (and so the test's time) varied
    # from 5 to 34 s (this secret: 3.3 s at 390 px)
    fixed_secret(store.parent)
    build_store(store)
    # the pages are what is tested, not the bots' processes: the bundled bots' policies play in this
    # process (a CLI tournament with real bot processes, its exit and its output, is test_cli_firsthour's)
    cfg = TournamentConfig(name="demo", bots=["random", "lowest", "heuristic"], rules="classic", deals=2,
                           concurrency=1, store=str(store))
    trio.run(lambda: run_tournament(cfg, Store(cfg.store), launcher=policy_launcher()))
    ladders = base / "ladders"
    ladders.mkdir()
    (ladders / "mini.toml").write_text(MINI_LADDER)
    server = ServerProc(store, "--allow-play", "--allow-submit", "--ladders", str(ladders), "--max-upload-mb", "1")
    server.store = store  # type: ignore[attr-defined]
    server.base = base  # type: ignore[attr-defined]
    yield server
    server.stop()


def log_in_as_first_admin(chrome: Any, site: ServerProc, name: str = "root") -> None:
    """Sign up the first admin with the link ``arena accounts first-admin`` prints (once per store),
    else log in as that admin."""
    code, out, _ = arena_here("accounts", "first-admin", "--store", str(site.store), "--url", site.url)  # type: ignore[attr-defined]
    if code == 0:
        chrome.get(out.split(": ", 1)[1].strip())
        chrome.find_element(By.ID, "name").send_keys(name)
        chrome.find_element(By.ID, "password").send_keys("correct horse battery")
        chrome.find_element(By.ID, "signup").click()
    else:
        chrome.get(f"{site.url}/login")
        chrome.find_element(By.ID, "name").send_keys(name)
        chrome.find_element(By.ID, "password").send_keys("correct horse battery")
        chrome.find_element(By.ID, "login").click()
    wait(chrome, lambda d: "(admin)" in d.find_element(By.ID, "who").text, what="logged in as the admin")


def table_rows(driver: Any, selector: str) -> list[dict[str, str]]:
    return driver.execute_script("""
        var t = document.querySelector(arguments[0]);
        var heads = Array.from(t.querySelectorAll('thead th')).map(function (h) { return h.textContent.trim(); });
        return Array.from(t.querySelectorAll('tbody tr')).map(function (tr) {
          var row = {label: tr.getAttribute('data-bot')};
          Array.from(tr.children).forEach(function (td, i) { row[heads[i]] = td.textContent.trim(); });
          return row;
        });""", selector)


# --------------------------------------------------------------------------- standings, charts

def test_pages_have_their_stylesheet_and_script_applied(chrome: Any, site: ServerProc) -> None:
    """Not just a 200: the page in the browser is styled by site.css (a computed style no browser
    default gives) and its script ran."""
    chrome.get(site.url + "/")
    WebDriverWait(chrome, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
    sheets = chrome.execute_script("return Array.from(document.styleSheets).map(s => s.href || '')")
    assert any(re.search(r"/static/site\.[0-9a-f]{10}\.css$", h) for h in sheets), sheets  # by content hash
    rules = chrome.execute_script(
        "const s = Array.from(document.styleSheets).find(s => /\\/static\\/site\\.[0-9a-f]{10}\\.css$/.test(s.href || ''));"
        "return s ? s.cssRules.length : -1")
    assert rules > 10, rules  # the stylesheet loaded and parsed, not an error page
    body_font = chrome.execute_script("return getComputedStyle(document.body).fontFamily")
    default = chrome.execute_script(
        "const f = document.createElement('iframe'); document.documentElement.appendChild(f);"
        "const v = getComputedStyle(f.contentDocument.body).fontFamily; f.remove(); return v")
    assert body_font != default, (body_font, default)


def test_ladder_standings_show_the_right_numbers(chrome: Any, site: ServerProc) -> None:
    from arena.ratings import fit_elo
    from arena.tournament.standings import outcomes
    chrome.get(f"{site.url}/ladders/{LADDER}")
    rows = table_rows(chrome, "#standings")
    expect = expected_ladder()
    db = Store(site.store)  # type: ignore[attr-defined]
    ratings = fit_elo(outcomes(db.results(f"ladder:{LADDER}:seed")), anchor_elo=1500.0)
    db.close()
    assert [r["label"] for r in rows] == ratings.standings()
    for rank, r in enumerate(rows, 1):
        e, fit = expect[r["label"]], ratings[r["label"]]
        assert r["#"] == str(rank)
        assert r["games"] == str(e["games"]) == "24"
        assert r["win % [95%]"].split(" ")[0] == f"{100 * e['wins'] / e['games']:.1f}"
        assert r["avg place"] == f"{e['place_sum'] / e['games']:.2f}"
        assert r["draw % [95%]"].endswith("]") and r["LOS↓"] != ""
        assert r["faults"] == str(e["faults"])
        assert r["ms/decision"] == f"{MS_PER_DECISION[r['label']]:.1f}"
        assert r["Elo ± 95%"] == f"{fit.elo:.0f} ± {(fit.ci_high - fit.ci_low) / 2:.0f}"
        assert r["version"] == r["label"].rsplit("@", 1)[1] and r["bot"] == r["label"].split("@", 1)[0]
    hostile = next(r for r in rows if r["label"] == HOSTILE)
    assert hostile["faults"] == "3" and hostile["bot"] == HOSTILE.split("@", 1)[0]
    assert chrome.execute_script("return window.__pwned") is None  # the name was shown, not run
    shot(chrome, "ladder")
    shot(chrome, "ladder", phone=True)


def test_rating_chart_and_heat_map(chrome: Any, site: ServerProc) -> None:
    chrome.get(f"{site.url}/ladders/{LADDER}")
    series = css(chrome, "#rating-chart g.series")
    assert sorted(s.get_attribute("data-bot") for s in series) == sorted(LADDER_BOTS)
    assert {s.get_attribute("data-points") for s in series} == {str(SNAPSHOTS)}
    assert len(css(chrome, "#rating-chart polygon.band")) == len(LADDER_BOTS)
    cells = css(chrome, "#heat-map rect.cell")
    assert len(cells) == len(LADDER_BOTS) * (len(LADDER_BOTS) - 1)
    by_pair = {(c.get_attribute("data-row"), c.get_attribute("data-col")): c for c in cells}
    ab = by_pair[("alpha@1.0", "beta@2.0")]
    assert ab.get_attribute("data-games") == "8" and float(ab.get_attribute("data-score")) == 0.75
    assert all(c.get_attribute("data-games") == "8" for c in cells)
    chrome.execute_script("document.getElementById('chart-box').scrollIntoView()")
    driver_shot_y = chrome.execute_script("return window.scrollY")
    assert driver_shot_y >= 0


def test_tournament_page_matches_arena_standings(chrome: Any, site: ServerProc) -> None:
    code, out, err = arena_here("standings", "demo", "--json", "--store", str(site.store))  # type: ignore[attr-defined]
    assert code == 0, err
    cli = json.loads(out)
    chrome.get(f"{site.url}/tournaments/demo")
    rows = table_rows(chrome, "#standings")
    assert [r["label"] for r in rows] == [c["bot"] for c in cli]
    for r, c in zip(rows, cli):
        assert r["games"] == str(c["games"])
        assert r["win % [95%]"] == (f"{100 * c['win_rate']:.1f} [{100 * c['win_rate_low']:.0f}, "
                                    f"{100 * c['win_rate_high']:.0f}]")
        assert r["avg place"] == f"{c['avg_place']:.2f}"
        assert r["LOS↓"] == ("-" if c["los_next"] is None else f"{100 * c['los_next']:.1f}%")
        assert r["ms/decision"] == ("-" if c["ms_per_decision"] is None else f"{c['ms_per_decision']:,.1f}")
        if c["rated"]:
            assert r["Elo ± 95%"].split(" ")[0] == f"{c['elo']:.0f}"
        else:
            assert r["Elo ± 95%"] == f"too few games ({c['games']})"
    assert chrome.find_element(By.CSS_SELECTOR, "#progress-box .played").text == "12"
    shot(chrome, "tournament")


def test_bot_page_lists_faults_with_stderr(chrome: Any, site: ServerProc) -> None:
    """A visitor sees the faults but not what the bot wrote; an admin, logged in, sees its stderr."""
    from urllib.parse import quote
    chrome.get(f"{site.url}/bots/{quote(HOSTILE, safe='@')}")
    assert chrome.find_element(By.TAG_NAME, "h1").text == HOSTILE
    faults = css(chrome, ".fault")
    assert len(faults) == 3 and not css(chrome, "pre.stderr") and "<boom>" not in chrome.page_source
    assert all(f.find_element(By.CSS_SELECTOR, ".private") for f in faults)
    log_in_as_first_admin(chrome, site)
    try:
        chrome.get(f"{site.url}/bots/{quote(HOSTILE, safe='@')}")
        faults = css(chrome, ".fault")
        assert all("ValueError: <boom>" in f.find_element(By.CSS_SELECTOR, "pre.stderr").text for f in faults)
        assert chrome.execute_script("return window.__pwned") is None
    finally:
        chrome.get(f"{site.url}/account")
        chrome.find_element(By.ID, "logout").click()
        wait(chrome, lambda d: d.current_url.rstrip("/") == site.url, what="logged out")
    chrome.get(f"{site.url}/bots/heuristic@1.0")
    assert len(css(chrome, "#slowest tbody tr")) == 10  # real logs: its ten slowest requests
    assert len(css(chrome, "#opponents tbody tr")) == 2
    shot(chrome, "bot")


def test_games_search_and_replay(chrome: Any, site: ServerProc) -> None:
    chrome.get(f"{site.url}/games?tournament=demo&bot=lowest")
    rows = css(chrome, "#games tbody tr[data-game]")
    assert len(rows) == 8 and all("lowest@1.0" in r.text for r in rows)
    shot(chrome, "games")
    rows[0].find_element(By.CSS_SELECTOR, "a.game-link").click()
    wait(chrome, lambda d: d.find_element(By.ID, "turn").text.startswith("Turn 0"), what="the replay")
    assert chrome.find_element(By.ID, "verify").get_attribute("data-ok") == "1"
    chrome.find_element(By.ID, "next").click()
    assert chrome.find_element(By.ID, "turn").text.startswith("Turn 1")
    shot(chrome, "replay")
    chrome.get(chrome.current_url.split("#")[0] + "?as=1")  # the address carries the turn (#t1) now
    wait(chrome, lambda d: d.find_element(By.ID, "view").get_attribute("value") == "1", what="seat view")
    assert css(chrome, "#seat-0-hand [data-card='back']")  # seat 1 cannot see seat 0's hand


# --------------------------------------------------------------------------- live

def test_game_of_a_background_tournament_appears_without_reload(chrome: Any, site: ServerProc) -> None:
    chrome.get(f"{site.url}/")
    wait(chrome, lambda d: d.find_element(By.ID, "live-status").text == "live", what="the event stream")
    chrome.execute_script("window.__samePage = 42")
    db = Store(site.store)  # type: ignore[attr-defined]
    try:  # the count the page shows once any event of earlier tests' writes has landed
        before = db.db.execute("SELECT COUNT(*) FROM games").fetchone()[0]
    finally:
        db.close()
    wait(chrome, lambda d: d.execute_script("return document.getElementById('game-count').dataset.count") == str(before),
         what="the store's count")
    # another process than the server's writes the store (this one: the bundled policies, in-process)
    cfg = TournamentConfig(name="live", bots=["random", "lowest"], rules="powers", deals=1, concurrency=1,
                           store=str(site.store))  # type: ignore[attr-defined]
    trio.run(lambda: run_tournament(cfg, Store(cfg.store), launcher=policy_launcher()))
    wait(chrome, lambda d: css(d, "#recent-games tr[data-game^='live-']"), 120, "a game of 'live' on the page")
    assert chrome.execute_script("return window.__samePage") == 42  # no reload
    assert css(chrome, "#tournaments tr[data-tournament='live']")
    wait(chrome, lambda d: int(d.find_element(By.ID, "game-count").get_attribute("data-count")) == before + 2,
         60, "both games counted")
    assert chrome.execute_script("return window.__samePage") == 42
    shot(chrome, "overview")
    shot(chrome, "overview", phone=True)


# --------------------------------------------------------------------------- play

def _still_a_control(node: Any) -> bool:
    """Whether a card is still clickable: a sent answer takes the controls away, and the next request redraws them."""
    try:
        return "pick" in (node.get_attribute("class") or "").split()
    except StaleElementReferenceException:
        return False


def _own_move(events: list[dict[str, Any]], seat: int) -> tuple | None:
    """The first move the seat made among these events, as (kind, detail), to compare with the card clicked."""
    for e in events:
        if e.get("seat") != seat:
            continue
        if e["kind"] == "played":
            return ("play", e["zone"], sorted(e["cards"]))
        if e["kind"] == "picked_up":
            return ("pick_up",)
        if e["kind"] == "flipped":
            return ("flip", e["position"])
    return None


# what the clicking-cards game reads of the page each turn, looked at in the page until a request
# other than the last one answered (arguments[0]) shows its controls, or the game ended ("end"): the
# request, the clickable cards with their zone and accessibility attributes, the page's width, in one
# round trip a turn, so its time goes to the game and not to one WebDriver call per attribute
TURN_JS = """
var root = document.getElementById('play');
var status = root.getAttribute('data-status');
if (status === 'over' || status === 'failed') return 'end';
var down = Array.from(document.querySelectorAll('#play-face-down .card'));
var picks = Array.from(document.querySelectorAll('.card.pick')).map(function (p) {
  var zone = p.parentElement.closest('div[id]');
  return {node: p, card: p.getAttribute('data-card'), role: p.getAttribute('role'),
          tabindex: p.getAttribute('tabindex'), label: p.getAttribute('aria-label'),
          zone: zone ? zone.id : null, down_index: down.indexOf(p)};
});
var request = root.getAttribute('data-request') || '';
var controls = picks.length > 0 || document.querySelector('#play-actions button.action') !== null;
if (request === arguments[0] || !controls) return null;
return {request: request, setup_need: root.getAttribute('data-setup-need'), picks: picks,
        scroll_width: document.documentElement.scrollWidth};
"""


@pytest.mark.parametrize("width", [DESKTOP[0], PHONE[0]])
def test_a_person_plays_a_whole_game_by_clicking_cards_only(chrome: Any, site: ServerProc, width: int) -> None:
    """Every play, pick-up and flip is made by clicking (or pressing Enter on) a card, and so is the
    setup's face-up choice (its cards clicked in the hand). Each move the game records is the one clicked,
    several cards of a rank are selected one by one, and at 390 px nothing scrolls sideways. At 390 px
    the game is played to its end (every phase's layout at phone width); at 1366 px its first 40 turns
    hold what that width adds (the setup, the keyboard pick-up, multi-card selections) and the turn
    cap ends it, which halves the test's clicks."""
    narrow = width == PHONE[0]
    viewport(chrome, *(PHONE if narrow else DESKTOP), mobile=narrow)
    try:
        chrome.get(f"{site.url}/?token={site.token}")
        chrome.get(f"{site.url}/play")
        Select(chrome.find_element(By.NAME, "rules")).select_by_visible_text("powers")
        Select(css(chrome, "select[name='opponent']")[0]).select_by_visible_text("lowest")
        chrome.find_element(By.NAME, "seed").send_keys("7")
        turns = chrome.find_element(By.NAME, "max_turns")
        turns.clear()
        turns.send_keys("400" if narrow else "40")
        chrome.find_element(By.ID, "play-start").click()
        clicked: dict[int, tuple] = {}
        last, keyboard = "", False
        while True:
            turn = wait_in_page(chrome, TURN_JS, last, what="a request or the end")
            if turn == "end":
                break
            req = last = turn["request"]
            if narrow:
                assert turn["scroll_width"] <= width
            picks = turn["picks"]
            need = turn["setup_need"]
            if need:  # setup: the face-up cards, clicked in the hand one by one
                assert picks, "the setup's face-up choice is made with the cards"
                chosen = [p["card"] for p in picks[:int(need)]]
                for p in picks[:int(need)]:
                    p["node"].click()
                clicked[int(req)] = ("setup", sorted(c[0] for c in chosen))
                continue
            for p in picks:
                assert p["role"] == "button" and p["tabindex"] == "0"
                assert p["label"]
            groups: dict[tuple, list[Any]] = {}
            for p in picks:
                if p["zone"] in ("play-hand", "play-face-up"):
                    groups.setdefault((p["zone"], p["card"][0]), []).append(p)
            pile = [p for p in picks if p["zone"] == "play-pile"]
            if pile and not keyboard:  # once, by keyboard: the pile is reachable without a pointer
                pile[0]["node"].send_keys("\n")
                keyboard = True
                clicked[int(req)] = ("pick_up",)
            elif groups:
                key, group = max(groups.items(), key=lambda kv: len(kv[1]))  # several of a rank when there are
                chosen: list[str] = []
                for p in group:
                    if not _still_a_control(p["node"]):
                        break  # sent
                    chosen.append(p["card"])
                    p["node"].click()
                if _still_a_control(group[0]["node"]):
                    group[0]["node"].click()  # a selected card clicked again sends the selection
                clicked[int(req)] = ("play", {"play-hand": "hand", "play-face-up": "face_up"}[key[0]], sorted(chosen))
            else:
                p = picks[0]
                move = ("pick_up",) if p["zone"] == "play-pile" else ("flip", p["down_index"])
                p["node"].click()
                clicked[int(req)] = move
        root = chrome.find_element(By.ID, "play")
        assert root.get_attribute("data-status") == "over", chrome.find_element(By.ID, "play-end").text
        if narrow:
            assert chrome.execute_script("return document.documentElement.scrollWidth") <= width
        sent = chrome.execute_script(
            "return fetch('/play/' + arguments[0] + '/state?seen=0').then(function (r) { return r.json(); })",
            root.get_attribute("data-session"))
        raws = [m["raw"] for m in sent["messages"]]
        requests = [i for i, r in enumerate(raws) if r["type"] == "request"]
        assert sorted(clicked) == [raws[i]["id"] for i in requests]
        moves = [c for c in clicked.values() if c[0] != "setup"]
        assert any(c[0] == "play" and len(c[2]) >= 2 for c in moves), moves  # a multi-card play was selected
        assert keyboard and any(c[0] == "pick_up" for c in moves)
        checked = 0
        setups = 0
        for i in requests:
            want = clicked[raws[i]["id"]]
            if want[0] == "setup":  # the next view's face-up holds the ranks clicked
                view = next(r["view"] for r in raws[i + 1:] if r["type"] == "request")
                assert sorted(c[0] for stack in view["face_up"] for c in stack) == want[1], (want, view)
                setups += 1
                continue
            after = next((r for r in raws[i + 1:] if r.get("events")), None)
            assert after is not None
            assert _own_move(after["events"], 0) == want, (raws[i]["id"], want, after["events"])
            checked += 1
        assert checked == len(moves) >= 5 and setups == 1
    finally:
        viewport(chrome, *DESKTOP)


# --------------------------------------------------------------------------- submit

def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


BROKEN_BOT = {
    "broken/bot.toml": 'name = "broken"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n',
    "broken/bot.py": "import sys\nprint('loading my model...', file=sys.stderr)\nraise SystemExit('no model file')\n",
}


def _upload(chrome: Any, site: ServerProc, archive: Path) -> None:
    chrome.get(f"{site.url}/submit")
    Select(chrome.find_element(By.NAME, "ladder")).select_by_visible_text("mini")
    chrome.find_element(By.NAME, "bot").send_keys(str(archive))
    chrome.find_element(By.ID, "submit-upload").click()


def test_a_broken_bot_gets_its_check_report_and_stays_off_the_ladder(chrome: Any, site: ServerProc,
                                                                       tmp_path: Path) -> None:
    chrome.get(f"{site.url}/?token={site.token}")
    chrome.get(f"{site.url}/submit")
    shot(chrome, "submit")
    _upload(chrome, site, _zip(tmp_path / "broken.zip", BROKEN_BOT))
    wait(chrome, lambda d: "/submit/" in d.current_url, what="the job page")
    wait(chrome, lambda d: d.find_element(By.ID, "job").get_attribute("data-status") in ("check failed", "placed",
                                                                                        "failed"),
         300, "the check to finish")
    assert chrome.find_element(By.ID, "job-status").text == "check failed"
    faults = css(chrome, "#check-faults li")
    assert faults and all(f.find_element(By.TAG_NAME, "b").text for f in faults)
    counts = [int(f.find_element(By.TAG_NAME, "b").text.rsplit("×", 1)[1]) for f in faults]
    assert chrome.find_element(By.ID, "check-total").text.startswith(f"{sum(counts)} fault(s) in ")
    assert "the bot wrote" not in chrome.find_element(By.ID, "check-faults").text  # it wrote nothing on stdout
    assert css(chrome, "#check-scenarios tbody tr")
    shot(chrome, "submit-report")
    db = Store(site.store)  # type: ignore[attr-defined]
    try:
        has = db.db.execute("SELECT 1 FROM sqlite_master WHERE name='ladder_members'").fetchone()
        members = [r[0] for r in db.db.execute("SELECT label FROM ladder_members")] if has else []
        assert "broken@1.0" not in members
        assert not db.db.execute("SELECT 1 FROM game_seats WHERE bot='broken@1.0' AND game IN "
                                 "(SELECT id FROM games WHERE tournament LIKE 'ladder:%')").fetchone()
    finally:
        db.close()


def test_path_traversal_and_oversized_uploads_are_refused(chrome: Any, site: ServerProc, tmp_path: Path) -> None:
    chrome.get(f"{site.url}/?token={site.token}")
    evil = _zip(tmp_path / "evil.zip", {"bot.toml": BROKEN_BOT["broken/bot.toml"], "../../outside.txt": "gotcha"})
    _upload(chrome, site, evil)
    error = wait(chrome, lambda d: d.find_element(By.ID, "submit-error"), what="the refusal")
    assert "leaves its folder" in error.text
    big = tmp_path / "big.zip"
    big.write_bytes(os.urandom(int(1.5 * 2**20)))
    _upload(chrome, site, big)
    error = wait(chrome, lambda d: d.find_element(By.ID, "submit-error"), what="the refusal")
    assert "larger than 1 MB" in error.text
    shot(chrome, "submit-refused")
    uploads = site.store.parent / "uploads"  # type: ignore[attr-defined]
    assert not any(uploads.rglob("outside.txt")) and not (site.base / "outside.txt").exists()  # type: ignore[attr-defined]


# the last action button of the request shown (often a play, so piles burn), or "end"
NEXT_BUTTON_JS = """
if (['over', 'failed'].indexOf(document.getElementById('play').getAttribute('data-status')) >= 0) return 'end';
var buttons = document.querySelectorAll('#play-actions button.action:not([disabled])');
return buttons.length ? buttons[buttons.length - 1] : null;
"""


def test_a_ladder_member_as_opponent_and_a_final_board_that_is_not_stale(chrome: Any, site: ServerProc,
                                                                         tmp_path: Path) -> None:
    """A bot on the site's ladder (a member as `arena submit` leaves one: its files snapshotted in
    the store; the submission itself, its check and placement games, is test_ladder.py's
    test_cli_submit_end_to_end); a person picks it (not a bundled bot) on
    the Play form and plays to the end by clicking the action buttons, one click a request, each
    request a view of the person's own seat. Then the board is the game's last position, not the last
    request's: the pile as it ended (after a burn it is empty, never the old "to beat"), no
    face-down cards for a seat that is out, and "game over" logged once; the game is stored with
    both seats and its replay link opens a replay that verifies."""
    from arena.bots.manifest import load_bot
    from arena.ladder import load_ladder, open_store
    from arena.ladder.tables import _add_member
    starter = tmp_path / "starter"
    shutil.copytree(ROOT / "examples" / "bots" / "python", starter)
    ladder = load_ladder(site.base / "ladders" / "mini.toml", store=site.store)  # type: ignore[attr-defined]
    lstore = open_store(ladder, site.store)  # type: ignore[attr-defined]
    try:
        _add_member(lstore, ladder, load_bot(str(starter)), "submitted", "test")
    finally:
        lstore.close()
    chrome.get(f"{site.url}/?token={site.token}")
    chrome.get(f"{site.url}/play")
    Select(chrome.find_element(By.NAME, "rules")).select_by_visible_text("powers")
    Select(css(chrome, "select[name='opponent']")[0]).select_by_visible_text("starter-python@1.0.0")
    turns = chrome.find_element(By.NAME, "max_turns")
    turns.clear()
    turns.send_keys("300")
    shot(chrome, "play-new")
    chrome.find_element(By.ID, "play-start").click()
    wait(chrome, lambda d: d.find_element(By.ID, "play").get_attribute("data-status") != "starting", what="the deal")
    clicks = 0
    while True:
        nxt = wait_in_page(chrome, NEXT_BUTTON_JS, what="a request or the end")
        if nxt == "end":
            break
        if clicks == 6:
            shot(chrome, "play")
            shot(chrome, "play", phone=True)
        nxt.click()
        clicks += 1
        assert clicks < 400
    root = chrome.find_element(By.ID, "play")
    assert root.get_attribute("data-status") == "over", chrome.find_element(By.ID, "play-end").text
    assert clicks >= 2
    sent = chrome.execute_script(
        "return fetch('/play/' + arguments[0] + '/state?seen=0').then(function (r) { return r.json(); })",
        root.get_attribute("data-session"))
    assert sent["names"][1].startswith("starter-python")
    kinds = [m["raw"]["type"] for m in sent["messages"]]  # the person answered each request with one click
    assert kinds[0] == "start" and kinds[-1] == "end" and set(kinds) <= {"start", "request", "end", "error"}
    assert kinds.count("request") == clicks
    assert all(m["raw"]["view"]["seat"] == 0 for m in sent["messages"] if m["raw"]["type"] == "request")
    from arena.engine.views import seat_view
    from arena.replay.simulate import simulate
    db = Store(site.store)  # type: ignore[attr-defined]
    try:
        record = db.game_record(sent["game"])
        games = db.games(tournament="play", bot="starter-python@1.0.0")
        assert len(games) == 1 and games[0]["seats"] == ["human@-", "starter-python@1.0.0"]
        assert games[0]["id"] == sent["game"]
    finally:
        db.close()
    final = seat_view(simulate(record).final, 0)
    assert sent["final"] == final
    last_request = [m["raw"]["view"] for m in sent["messages"] if m["raw"]["type"] == "request"][-1]
    assert last_request["turn"] < final["turn"]  # moves were made after the last request: its board is stale
    assert root.get_attribute("data-turn") == str(final["turn"])
    pile = [c.get_attribute("data-card") for c in css(chrome, "#play-pile .card")]
    assert pile == final["pile"]
    info = chrome.find_element(By.ID, "play-pile-info").text
    assert f"to beat: {final['pile_top'] or 'anything'}" in info
    for p in final["players"]:
        if p["seat"] != 0 and p["place"] is not None:
            box = chrome.find_element(By.CSS_SELECTOR, f"#play-others .seat[data-seat='{p['seat']}']")
            assert not box.find_elements(By.CSS_SELECTOR, ".card.down"), "a seat that is out shows face-down cards"
    logged = [li.text for li in css(chrome, "#play-events li")]
    assert sum(t.startswith("game over") for t in logged) == 1, logged[-5:]
    shot(chrome, "play-over")
    chrome.find_element(By.ID, "play-replay").click()
    wait(chrome, lambda d: d.find_element(By.ID, "turn").text.startswith("Turn 0"), what="the stored game's replay")
    assert chrome.find_element(By.ID, "verify").get_attribute("data-ok") == "1"


def test_a_season_and_its_balance_read_whole_at_phone_width(chrome: Any, site: ServerProc, tmp_path: Path) -> None:
    """At 390 px the published hash and the revealed secret wrap inside the page (a stranger copies
    them from a phone), and the season's and the balance audit's tables scroll in their own box:
    the page itself never scrolls sideways. The two ladders are played into the site's store (the
    server reads their files from the copies the store keeps), not a server of their own."""
    from arena.ladder.seasons import end_season, start_season
    from tests.test_seasons import _ladder, _play
    # the site's store is a club's once its first admin signed up: these ladders seat the organiser's
    # own bundled bots together, as MINI_LADDER's do
    club = {"store": str(site.store), "one_seat_per_author": False}  # type: ignore[attr-defined]
    _path, ladder, store = _ladder(tmp_path, **club)
    _play(ladder, store, 8)
    s = start_season(store, ladder)
    _play(ladder, store, 8)
    end_season(store, ladder)
    store.close()
    from arena.ladder import load_ladder, open_store
    from tests.test_ladder import write_ladder
    (tmp_path / "w").mkdir()
    wide = load_ladder(write_ladder(tmp_path / "w", "wide", seats=4, bots=["random", "lowest", "highest", "heuristic"],
                                    **club))
    store = open_store(wide)
    _play(wide, store, 4)  # four seat columns
    store.close()
    try:
        viewport(chrome, *PHONE, mobile=True)
        for page in ("/ladders/sea/seasons/1", "/ladders/wide/balance"):
            chrome.get(site.url + page)
            wait(chrome, lambda d: d.find_elements(By.CSS_SELECTOR, "table"), what=page)
            shot(chrome, "season" if "seasons" in page else "balance")
            assert chrome.execute_script("return document.documentElement.scrollWidth") <= PHONE[0], page
        chrome.get(site.url + "/ladders/sea/seasons/1")
        for selector in ("code.commitment", "code.secret"):
            right = chrome.execute_script("return document.querySelector(arguments[0]).getBoundingClientRect().right",
                                          selector)
            assert right <= PHONE[0], (selector, right)
        assert s.commitment in chrome.find_element(By.CSS_SELECTOR, "code.commitment").text.replace("\n", "")
    finally:
        viewport(chrome, *DESKTOP)
