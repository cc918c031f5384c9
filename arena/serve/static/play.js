/* Play: draws only the messages the person's seat is sent (start, request, end, error), as a bot
   in that seat would get them, and answers each request with the id of the chosen action. */
(function () {
  "use strict";
  var root = document.getElementById("play");
  var sid = root.getAttribute("data-session");
  var seen = 0, current = null, names = [];
  var SUITS = { C: "\u2663", D: "\u2666", H: "\u2665", S: "\u2660" };

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function fill(node, kids) {
    while (node.firstChild) node.removeChild(node.firstChild);
    kids.forEach(function (k) { node.appendChild(k); });
  }
  function card(c, extra) {
    if (c === "back") return el("span", "card back", null);
    if (c === "empty") return el("span", "card empty", null);
    var rank = c[0], suit = c[1], e;
    if (rank === "X") {
      e = el("span", "card joker" + (suit === "R" ? " red" : ""));
      e.appendChild(el("b", null, "JKR")); e.appendChild(el("i", null, "\u2605"));
    } else {
      e = el("span", "card" + (suit === "D" || suit === "H" ? " red" : ""));
      e.appendChild(el("b", null, rank === "T" ? "10" : rank)); e.appendChild(el("i", null, SUITS[suit] || suit));
    }
    e.setAttribute("data-card", c);
    e.title = c;
    if (extra) e.className += " " + extra;
    return e;
  }
  function stacks(list) {
    if (list === null || list === undefined) return [el("span", "hidden-note", "hidden until play starts")];
    return list.map(function (st) {
      var g = el("span", "stack");
      st.forEach(function (c) { g.appendChild(card(c)); });
      return g;
    });
  }
  function who(seat) { return seat === Number(root.getAttribute("data-seat")) ? "you" : (names[seat] || "seat " + seat); }
  function status(text) { $("play-status").textContent = text; }
  function addEvents(list) {
    var box = $("play-events");
    list.forEach(function (t) { box.appendChild(el("li", /^burn!/.test(t) ? "burn" : "", t)); });
    while (box.children.length > 200) box.removeChild(box.firstChild);
    box.scrollTop = box.scrollHeight;
  }

  function draw(v, over) {
    root.setAttribute("data-turn", String(v.turn));
    var pile = v.pile.map(function (c, i) { return card(c, i === v.pile.length - 1 ? "top" : ""); });
    fill($("play-pile"), pile.length ? pile : [el("span", "hidden-note", "(empty pile)")]);
    var info = ["to beat: " + (v.pile_top || "anything"), "stock " + v.stock, "burned " + v.burned.length];
    if (v.need > 1) info.push("at least " + v.need + " cards");
    if (v.descending) info.push("descending");
    fill($("play-pile-info"), info.map(function (t) { return el("span", null, t); }));
    fill($("play-others"), v.players.filter(function (p) { return p.seat !== v.seat; }).map(function (p) {
      var box = el("div", "seat" + (!over && v.to_move === p.seat ? " to-move" : "") + (p.place !== null ? " gone" : ""));
      box.setAttribute("data-seat", String(p.seat));
      var head = el("div", "seat-head");
      head.appendChild(el("span", "name", "seat " + p.seat + ": " + who(p.seat)));
      head.appendChild(el("span", "status", p.forfeit ? "forfeited" : (p.place !== null ? "out: place " + p.place : p.hand_count + " in hand")));
      box.appendChild(head);
      var hand = el("div", "cards");
      var known = p.known_hand || [];
      known.forEach(function (c) { hand.appendChild(card(c, "known")); });
      for (var i = known.length; i < p.hand_count; i++) hand.appendChild(card("back"));
      box.appendChild(hand);
      var table = el("div", "cards");
      stacks(p.face_up).forEach(function (s) { table.appendChild(s); });
      if (p.place === null) {  // a seat that is out has no cards left on the table to draw
        (p.face_down || []).forEach(function (d) { table.appendChild(card(d ? "back" : "empty", "down")); });
      }
      box.appendChild(table);
      return box;
    }));
    fill($("play-hand"), v.hand.map(function (c) { return card(c); }));
    fill($("play-face-up"), stacks(v.face_up));
    fill($("play-face-down"), (v.face_down || []).map(function (d) { return card(d ? "back" : "empty"); }));
  }

  function choose(id, button) {
    if (!current) return;
    var req = current;
    current = null;
    document.querySelectorAll("#play-actions button").forEach(function (b) { b.disabled = true; });
    document.querySelectorAll(".card.pick").forEach(function (c) {
      c.classList.remove("pick"); c.removeAttribute("tabindex"); c.removeAttribute("role");
    });
    button.classList.add("chosen");
    status("Sent. Waiting for the others…");
    fetch("/play/" + sid + "/act", {
      method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ request: req.id, action: id })
    }).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { status("Refused: " + t.slice(0, 200)); current = req; });
    });
  }

  function actions(req, labels) {
    fill($("play-actions"), req.actions.map(function (a, i) {
      var b = el("button", "action", labels[i]);
      b.type = "button";
      b.setAttribute("data-action", String(a.id));
      b.addEventListener("click", function () { choose(a.id, b); });
      return b;
    }));
  }

  /* Cards as controls: each play (one rank, from hand or face-up), the pile's pick-up and each
     face-down flip is a focusable card. A click selects a card; a play is sent once the selection
     matches a legal play and no larger legal play of that rank is left, or when a selected card is
     clicked again. Plays that need more than cards say (joker targets, surrenders) stay buttons. */
  function cardControls(req) {
    var setups = req.actions.filter(function (a) { return a.kind === "set_face_up"; });
    root.removeAttribute("data-setup-need");
    if (setups.length) { setupControls(setups); return; }
    var sel = [], zoneOf = { hand: "play-hand", face_up: "play-face-up" };
    function label(a) { return a.cards.join("+"); }
    function bag(list) { return list.slice().sort().join(","); }
    function clear() { sel.forEach(function (n) { n.classList.remove("selected"); n.setAttribute("aria-pressed", "false"); }); sel = []; }
    function control(node, name, onpick) {
      node.classList.add("pick");
      node.tabIndex = 0;
      node.setAttribute("role", "button");
      node.setAttribute("aria-label", name);
      node.addEventListener("click", onpick);
      node.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onpick(); }
      });
    }
    var plays = req.actions.filter(function (a) { return a.kind === "play" && zoneOf[a.from] && a.target === undefined; });
    Object.keys(zoneOf).forEach(function (zone) {
      var mine = plays.filter(function (a) { return a.from === zone; });
      if (!mine.length) return;
      $(zoneOf[zone]).querySelectorAll(".card[data-card]").forEach(function (node) {
        var c = node.getAttribute("data-card");
        var ofRank = mine.filter(function (a) { return a.cards[0][0] === c[0] && a.cards.indexOf(c) >= 0; });
        if (!ofRank.length) return;
        node.setAttribute("aria-pressed", "false");
        control(node, "play " + c + " from your " + zone.replace("_", "-"), function () {
          if (!current) return;
          var again = sel.indexOf(node) >= 0;
          if (!again) {
            if (sel.length && (sel[0].getAttribute("data-zone") !== zone || sel[0].getAttribute("data-card")[0] !== c[0])) clear();
            node.setAttribute("data-zone", zone);
            sel.push(node); node.classList.add("selected"); node.setAttribute("aria-pressed", "true");
          }
          var cards = sel.map(function (n) { return n.getAttribute("data-card"); });
          var match = ofRank.filter(function (a) { return bag(a.cards) === bag(cards); })[0];
          var larger = ofRank.some(function (a) { return a.cards.length > cards.length; });
          if (match && (again || !larger)) choose(match.id, node);
          else status(match ? "Selected " + label(match) + ": click a selected card to play it, or add another " + c[0] + "."
                            : "Selected " + cards.join("+") + ": add another " + c[0] + " (click a selected card to start over).");
          if (again && !match) clear();
        });
      });
    });
    var picks = req.actions.filter(function (a) { return a.kind === "pick_up" && a.surrender === undefined; });
    var top = $("play-pile").querySelector(".card.top");
    if (picks.length === 1 && top) control(top, "pick up the pile", function () { choose(picks[0].id, top); });
    var downs = $("play-face-down").querySelectorAll(".card");
    req.actions.forEach(function (a) {
      var node = a.kind === "flip" ? downs[a.position] : null;
      if (node) control(node, "turn over face-down card " + (a.position + 1), function () { choose(a.id, node); });
    });
  }

  /* The setup's face-up choice by cards too: the hand's cards are toggled, and once as many are
     selected as the face-up takes, the choice holding exactly those cards is sent (or, the actions
     naming one card per rank, the one of the same ranks). Rules whose choices differ in size keep
     the buttons alone. */
  function setupControls(setups) {
    function flat(a) { return [].concat.apply([], a.face_up); }
    function bag(list) { return list.slice().sort().join(","); }
    function ranks(list) { return list.map(function (c) { return c[0]; }).sort().join(","); }
    var need = flat(setups[0]).length;
    if (setups.some(function (a) { return flat(a).length !== need; })) return;
    var offered = {};
    setups.forEach(function (a) { flat(a).forEach(function (c) { offered[c[0]] = true; }); });
    var sel = [];
    root.setAttribute("data-setup-need", String(need));
    status("Choose your " + need + " face-up cards: click them in your hand.");
    $("play-hand").querySelectorAll(".card[data-card]").forEach(function (node) {
      var c = node.getAttribute("data-card");
      if (!offered[c[0]]) return;
      node.classList.add("pick");
      node.tabIndex = 0;
      node.setAttribute("role", "button");
      node.setAttribute("aria-label", "put " + c + " face-up");
      node.setAttribute("aria-pressed", "false");
      function pick() {
        if (!current) return;
        var at = sel.indexOf(node);
        if (at >= 0) { sel.splice(at, 1); node.classList.remove("selected"); node.setAttribute("aria-pressed", "false"); }
        else { sel.push(node); node.classList.add("selected"); node.setAttribute("aria-pressed", "true"); }
        var cards = sel.map(function (n) { return n.getAttribute("data-card"); });
        if (cards.length < need) { status("Face-up: " + (cards.join(" ") || "none yet") + "; choose " + (need - cards.length) + " more."); return; }
        var match = setups.filter(function (a) { return bag(flat(a)) === bag(cards); })[0] ||
                    setups.filter(function (a) { return ranks(flat(a)) === ranks(cards); })[0];
        if (match) { choose(match.id, node); return; }
        status("No legal face-up holds " + cards.join(" ") + ": choose again.");
        sel.forEach(function (n) { n.classList.remove("selected"); n.setAttribute("aria-pressed", "false"); });
        sel = [];
      }
      node.addEventListener("click", pick);
      node.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); }
      });
    });
  }

  function handle(m) {
    var raw = m.raw;
    $("play-raw").textContent = JSON.stringify(raw, null, 2);
    if (m.events) addEvents(m.events);
    if (raw.type === "start") {
      names = raw.names.slice();
      status("Dealt. You get a request when it is your move.");
    } else if (raw.type === "request") {
      current = raw;
      draw(raw.view);
      $("play-decision").textContent = "Your move (" + raw.decision.replace(/_/g, " ") + "), request " + raw.id;
      actions(raw, m.actions);
      status("Your move: choose one of the " + raw.actions.length + " legal actions below.");
      cardControls(raw);
      root.setAttribute("data-request", String(raw.id));
    } else if (raw.type === "error") {
      addEvents(["you forfeit (" + raw.reason + "): " + raw.message]);
    } else if (raw.type === "end") {
      current = null;
      fill($("play-actions"), []);
      $("play-decision").textContent = "Game over";
      var told = (raw.events || []).some(function (e) { return e.kind === "game_over"; });
      if (!told) addEvents(["game over: " + m.result]);  // the events end with it as a rule
      status("Game over: " + m.result);
    }
  }

  function finish(s) {
    if (s.final) draw(s.final, true);  // the last request's board is older than the game's last moves
    root.setAttribute("data-status", s.status);
    var end = $("play-end");
    end.hidden = false;
    fill(end, []);
    if (s.status === "failed") {
      end.appendChild(document.createTextNode("The game could not be finished: " + s.error));
      return;
    }
    end.appendChild(document.createTextNode("Stored as " + s.game + ". "));
    var a = el("a", null, "Watch its replay");
    a.href = s.replay;
    a.id = "play-replay";
    end.appendChild(a);
    var again = el("a", null, "play again");
    again.href = "/play";
    end.appendChild(document.createTextNode(" or "));
    end.appendChild(again);
    end.appendChild(document.createTextNode("."));
  }

  function poll() {
    fetch("/play/" + sid + "/state?seen=" + seen, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error(String(r.status))); })
      .then(function (s) {
        names = s.names;
        s.messages.forEach(handle);
        seen = s.count;
        root.setAttribute("data-seen", String(seen));
        if (s.status === "over" || s.status === "failed") { finish(s); return; }
        root.setAttribute("data-status", s.status);
        poll();
      }, function () { setTimeout(poll, 1000); });
  }
  poll();
})();
