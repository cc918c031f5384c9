/* Live regions: elements with data-live and an id are re-read from the server when the store
   changes (server-sent events from /events), without reloading the page. Pages whose state lives
   in the server process (a submission being checked) set data-poll on <body> and refresh on a timer.
   Each store event names the store's new version and each ladder's (a ladder's pages follow their
   own ladder's): a page fetches itself at most once per version,
   and revalidates (ETag), so a page the change did not touch costs a 304.
   The event also carries each ladder's game count and its newest results: a ladder's page shows
   them from the event at once ([data-news]), before (and whether or not) its own fetch is answered.
   Bot labels are anyone's text: they are written with textContent, never as markup. */
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  var body = document.body;
  var refreshes = 0, busy = false, again = false, hellos = 0, shown = null, wanted = null, count = null;
  var LATEST = 5;

  // The ladder's game count from the news; a fetched page (built for the pages' version, which
  // moves at most once a settle) never takes it back below what the news said.
  function showCount(fromEvent) {
    var node = document.querySelector("[data-news=games]");
    if (!node || count === null) return;
    if (!fromEvent && Number(node.getAttribute("data-count")) >= count) return;
    node.textContent = count + " games";
    node.setAttribute("data-count", String(count));
  }

  function place(n) { return n + (n % 10 === 1 && n % 100 !== 11 ? "st" : n % 10 === 2 && n % 100 !== 12 ? "nd" :
                                   n % 10 === 3 && n % 100 !== 13 ? "rd" : "th"); }

  function showLatest(games) {
    var list = document.querySelector("[data-news=latest]");
    if (!list) return;
    for (var i = games.length - 1; i >= 0; i--) {  // oldest first, so the newest ends on top
      var g = games[i], item = document.createElement("li"), link = document.createElement("a");
      var words = [], at = 1;
      (g.places || []).forEach(function (group) {
        words.push((g.draw && group.length > 1 ? "draw: " : place(at) + " ") + group.join(", "));
        at += group.length;
      });
      if (g.out && g.out.length) words.push("forfeit: " + g.out.join(", "));
      link.href = "/games/" + encodeURIComponent(String(g.game));
      link.textContent = words.join(" \u00b7 ");
      item.appendChild(link);
      list.insertBefore(item, list.firstChild);
    }
    while (list.children.length > LATEST) list.removeChild(list.lastChild);
    list.hidden = false;
  }

  function say(text, cls) {
    if (!status) return;
    status.textContent = text;
    status.className = "live-status " + cls;
  }

  function refresh() {
    if (!document.querySelector("[data-live]")) return;
    if (busy) { again = true; return; }
    busy = true;
    var fetching = wanted;
    fetch(location.href, { cache: "no-cache", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error(String(r.status))); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (node) {
          var fresh = node.id ? doc.getElementById(node.id) : null;
          if (fresh) node.replaceWith(document.importNode(fresh, true));
        });
        var poll = doc.body.getAttribute("data-poll");
        if (poll) body.setAttribute("data-poll", poll); else body.removeAttribute("data-poll");
        showCount(false);
        refreshes += 1;
        shown = fetching;
        body.setAttribute("data-refreshes", String(refreshes));
      })
      .catch(function () { /* the next event or tick tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var source = null;
  function connect() {
    if (!window.EventSource) { say("not live", "off"); return; }
    source = new EventSource("/events");
    source.addEventListener("hello", function () {
      say("live", "on");
      hellos += 1;
      if (hellos > 1) refresh();  // reconnected: something may have changed meanwhile
    });
    source.addEventListener("store", function (e) {
      say("live", "on");
      var news = {};
      try { news = JSON.parse(e.data); } catch (err) { /* ignore */ }
      if (news.games !== undefined) body.setAttribute("data-store-games", String(news.games));
      // A ladder's page (data-part) follows its ladder's own version: another ladder's game is no news.
      var part = body.getAttribute("data-part");
      if (part !== null && news.ladders && typeof news.ladders[part] === "number") {
        count = news.ladders[part];
        showCount(true);
      }
      if (part !== null && news.latest && Array.isArray(news.latest[part])) showLatest(news.latest[part]);
      // News alone (the pages' version has not moved) is nothing to fetch: a page that fetched on it
      // would fetch a version it holds, or one already being fetched, a second time.
      if (news.moved === false) return;
      var version = (part !== null && news.parts && news.parts[part]) || news.version;
      if (version && version === shown) return;  // this version is on the page already
      wanted = version || null;
      refresh();
    });
    source.onerror = function () { say("reconnecting\u2026", "off"); };
  }
  // A page left open in the back/forward cache would keep its stream, and browsers allow only a
  // few connections per server: close it when the page is hidden, reopen when it comes back.
  window.addEventListener("pagehide", function () { if (source) { source.close(); source = null; } });
  window.addEventListener("pageshow", function (e) { if (e.persisted && !source) { hellos = 1; connect(); } });
  connect();
  setInterval(function () { if (body.getAttribute("data-poll")) refresh(); }, 1500);
  window.arenaLive = { refresh: refresh };
})();
