"""Self-contained HTML: one game's replay, or a tournament report with every replay.

Everything is inline (CSS, JavaScript, the game's frames as JSON): the file works
offline, from disk, with no network and no external assets. Cards are drawn
with HTML and CSS. Stable ids and data attributes (``#turn``, ``#pile``,
``#seat-0-hand``, ``#action``, ``data-card``) make the page testable.

The seat selector hides what that seat could not see (other hands except their
known cards, every face-down card, others' setup choices). It is a display
filter: the omniscient data is in the file.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from pathlib import Path
from typing import Any

from ..tournament.standings import Line
from ..tournament.store import write_private_text

CSS = r"""
:root { --felt: #1f5d3a; --felt2: #174a2e; --ink: #1b1b1b; --red: #c0142b; --gold: #f2c14e; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background: #f4f1ea; color: var(--ink); }
a { color: #0b57a4; }
.replay { max-width: 1200px; margin: 0 auto; padding: 12px 16px 32px; }
.replay header h1 { font-size: 20px; margin: 4px 0; }
#meta { color: #555; }
#verify { margin: 8px 0; padding: 6px 10px; border-radius: 6px; }
#verify.ok { background: #e3f4e6; color: #1e6b32; }
#verify.bad { background: #fde2e2; color: #8a1020; font-weight: 600; }
#verify ul { margin: 4px 0 0 16px; padding: 0; font-weight: normal; }
#controls { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; position: sticky; top: 0; z-index: 2;
  background: #f4f1ea; padding: 8px 0; border-bottom: 1px solid #ddd; }
#controls button { font: inherit; padding: 4px 10px; border: 1px solid #999; border-radius: 6px; background: #fff; cursor: pointer; }
#controls button:hover { background: #eef; }
#slider { flex: 1 1 240px; min-width: 160px; }
#turn { font-weight: 700; min-width: 120px; }
#step { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 8px 12px; margin: 10px 0; min-height: 90px; }
#action { font-weight: 600; }
#action .ms { color: #777; font-weight: normal; }
#events { margin: 4px 0; padding-left: 20px; }
#events li.burn { color: #b35a00; font-weight: 600; }
#events li.forfeit { color: var(--red); font-weight: 600; }
#stderr { margin: 4px 0; background: #10242e; color: #9fe3ff; padding: 4px 8px; border-radius: 4px; white-space: pre-wrap; }
#stderr:empty { display: none; }
#thought { color: #6a2c91; }
#thought:empty { display: none; }
#thought .warn { color: #8a5a00; }
#winprob { margin: 8px 0; background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 6px 10px; }
#winprob svg { width: 100%; height: 110px; display: block; }
#winprob .legend span { margin-right: 12px; font-size: 12px; }
#winprob .legend i { display: inline-block; width: 14px; height: 3px; vertical-align: middle; margin-right: 4px; }
#mismatch { color: var(--red); font-weight: 600; }
#notice { color: #8a5a00; min-height: 1em; }
#table-area { background: radial-gradient(ellipse at center, var(--felt), var(--felt2)); border-radius: 14px; padding: 14px; color: #fff; }
#pile-area { text-align: center; padding: 8px; margin-bottom: 12px; border-bottom: 1px dashed rgba(255,255,255,.3); }
#pile { min-height: 64px; display: flex; justify-content: center; flex-wrap: wrap; gap: 2px; }
#pile-info { margin-top: 6px; display: flex; gap: 14px; justify-content: center; flex-wrap: wrap; }
#beat { color: var(--gold); font-weight: 700; }
#seats { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 10px; }
.seat { background: rgba(0,0,0,.18); border: 2px solid transparent; border-radius: 10px; padding: 8px; }
.seat.to-move { border-color: var(--gold); box-shadow: 0 0 10px rgba(242,193,78,.6); }
.seat.acted { background: rgba(255,255,255,.10); }
.seat.gone { opacity: .6; }
.seat-head { display: flex; justify-content: space-between; font-weight: 700; margin-bottom: 4px; }
.seat-head .status { font-weight: normal; color: var(--gold); }
.zone { display: flex; align-items: center; gap: 6px; margin: 3px 0; }
.zone .label { width: 70px; flex: none; font-size: 12px; color: #cfe; }
.cards { display: flex; flex-wrap: wrap; gap: 3px; align-items: center; min-height: 30px; }
.stack { display: inline-flex; gap: 0; margin-right: 6px; }
.stack .card + .card { margin-left: -14px; }
.card { display: inline-flex; flex-direction: column; align-items: center; justify-content: center; width: 34px; height: 48px;
  background: #fff; color: var(--ink); border: 1px solid #888; border-radius: 5px; font-weight: 700; line-height: 1;
  box-shadow: 1px 1px 2px rgba(0,0,0,.4); user-select: none; }
.card b { font-size: 15px; }
.card i { font-style: normal; font-size: 15px; }
.card.red { color: var(--red); }
.card.joker b { font-size: 10px; }
.card.back { background: repeating-linear-gradient(45deg, #2b4c9a 0 4px, #1d3675 4px 8px); border-color: #fff; }
.card.down { background: #e8e3d6; opacity: .85; border-style: dashed; }
.card.empty { background: transparent; border: 1px dashed rgba(255,255,255,.35); box-shadow: none; }
.card.known { outline: 2px solid #7fd0ff; }
.card.top { outline: 3px solid var(--gold); transform: translateY(-4px); }
.card.glass { opacity: .55; }
.hidden-note { font-style: italic; color: #cfe; font-size: 12px; }
#result { margin-top: 12px; font-weight: 700; }
#help { color: #666; font-size: 12px; margin-top: 8px; }
.bracket { display: flex; gap: 16px; overflow-x: auto; margin: 8px 0 20px; align-items: center; }
.bracket section { display: flex; flex-direction: column; gap: 10px; min-width: 180px; }
.bracket h3 { font-size: 13px; margin: 0; color: #555; }
.bracket .table { background: #fff; border: 1px solid #ccc; border-radius: 6px; padding: 4px 8px; }
.bracket .table div { display: flex; justify-content: space-between; gap: 12px; }
.bracket .went-on { font-weight: 700; }
.bracket .note, .bracket .waiting { font-size: 12px; color: #555; }
table.list { border-collapse: collapse; margin: 8px 0 20px; background: #fff; }
table.list th, table.list td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; }
table.list th { background: #eee; }
table.list td.num { text-align: right; }
tr.bad td { background: #fde2e2; }
#back { margin: 8px 0; display: inline-block; }
"""

JS = r"""
(function () {
  "use strict";
  var SUITS = { C: "\u2663", D: "\u2666", H: "\u2665", S: "\u2660" };

  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (var i = 2; i < arguments.length; i++) if (arguments[i]) e.appendChild(arguments[i]);
    return e;
  }

  function card(c, extra) {
    // c: "7H", "TS", "XR"; null for a played face-down place; "back" for a hidden card
    var cls = "card";
    if (c === null) return el("span", { cls: "card empty", "data-card": "none", title: "played" });
    if (c === "back") return el("span", { cls: "card back" + (extra ? " " + extra : ""), "data-card": "back", title: "hidden" });
    var rank = c[0], suit = c[1], e;
    if (rank === "X") {
      cls += " joker" + (suit === "R" ? " red" : "");
      e = el("span", { cls: cls, "data-card": c, title: "joker" }, el("b", { text: "JKR" }), el("i", { text: "\u2605" }));
    } else {
      if (suit === "D" || suit === "H") cls += " red";
      e = el("span", { cls: cls, "data-card": c, title: c }, el("b", { text: rank === "T" ? "10" : rank }), el("i", { text: SUITS[suit] || suit }));
    }
    if (extra) e.className += " " + extra;
    return e;
  }

  function thoughtText(t) {
    var parts = [];
    if (typeof t.win_prob === "number") parts.push("win " + Math.round(100 * t.win_prob) + "%");
    if (typeof t.eval === "number") parts.push("eval " + (t.eval >= 0 ? "+" : "") + Number(t.eval.toPrecision(3)));
    ["iterations", "nodes"].forEach(function (k) { if (typeof t[k] === "number") parts.push(t[k].toLocaleString("en") + " " + k); });
    if (typeof t.text === "string") parts.push(JSON.stringify(t.text));
    return parts.join(" · ");
  }

  function fill(node, kids) {
    while (node.firstChild) node.removeChild(node.firstChild);
    kids.forEach(function (k) { node.appendChild(k); });
  }

  function Viewer(root, data) {
    this.root = root;
    this.data = data;
    this.k = 0;
    this.view = data.view === null || data.view === undefined ? "all" : String(data.view);
    this.build();
    document.getElementById("view").value = this.view;
    this.show(0);
  }

  Viewer.prototype.build = function () {
    var d = this.data, self = this, n = d.frames.length - 1;
    var title = el("h1", { id: "title", text: "Replay: " + d.game });
    var meta = el("div", { id: "meta", text: d.rules + " rules \u00b7 seed " + d.seed + " \u00b7 " + d.labels.join(" vs ") + " \u00b7 " + n + " turns" });
    var verify = el("div", { id: "verify" });
    if (d.verify.ok) {
      verify.className = "ok";
      verify.setAttribute("data-ok", "1");
      verify.textContent = "Verified: re-simulating the deal and the actions reproduces every logged event and the result.";
    } else {
      verify.className = "bad";
      verify.setAttribute("data-ok", "0");
      verify.textContent = "Warning: this replay does not match its log (" + d.verify.mismatches.length + " mismatch(es))" +
        (d.verify.complete ? "" : "; it stops where the log cannot be followed");
      var ul = el("ul");
      d.verify.mismatches.slice(0, 50).forEach(function (m) { ul.appendChild(el("li", { text: m })); });
      verify.appendChild(ul);
    }
    var select = el("select", { id: "view", title: "Whose view" });
    select.appendChild(el("option", { value: "all", text: "everyone (omniscient)" }));
    d.labels.forEach(function (name, i) { select.appendChild(el("option", { value: String(i), text: "seat " + i + ": " + name })); });
    var slider = el("input", { id: "slider", type: "range", min: "0", max: String(n), value: "0", step: "1", "aria-label": "turn" });
    function button(id, text, title, fn) {
      var b = el("button", { id: id, type: "button", title: title, text: text });
      b.addEventListener("click", fn);
      return b;
    }
    var controls = el("nav", { id: "controls" },
      button("first", "\u00ab first", "first (Home)", function () { self.show(0); }),
      button("prev", "\u25c0 prev", "previous (\u2190)", function () { self.show(self.k - 1); }),
      button("next", "next \u25b6", "next (\u2192)", function () { self.show(self.k + 1); }),
      button("last", "last \u00bb", "last (End)", function () { self.show(n); }),
      button("next-burn", "next burn (b)", "next burn", function () { self.jump("burn", "burn"); }),
      button("next-pickup", "next pick-up (u)", "next pick-up", function () { self.jump("pickup", "pick-up"); }),
      slider, el("span", { id: "turn" }),
      el("label", null, document.createTextNode("view "), select));
    slider.addEventListener("input", function () { self.show(parseInt(slider.value, 10)); });
    select.addEventListener("change", function () { self.view = select.value; self.show(self.k); });
    var step = el("section", { id: "step" }, el("div", { id: "action" }), el("div", { id: "thought" }),
      el("ul", { id: "events" }), el("pre", { id: "stderr" }), el("div", { id: "mismatch" }), el("div", { id: "notice" }));
    var chart = this.winChart();
    var pileInfo = el("div", { id: "pile-info" }, el("span", { id: "beat" }), el("span", { id: "stock" }),
      el("span", { id: "burned" }), el("span", { id: "set-aside" }), el("span", { id: "direction" }), el("span", { id: "to-move" }));
    var seats = el("div", { id: "seats" });
    d.labels.forEach(function (name, i) {
      function zone(label, id) {
        return el("div", { cls: "zone" }, el("span", { cls: "label", text: label }), el("div", { cls: "cards", id: id }));
      }
      seats.appendChild(el("div", { cls: "seat", id: "seat-" + i, "data-seat": String(i) },
        el("div", { cls: "seat-head" }, el("span", { cls: "name", text: "seat " + i + ": " + name }),
          el("span", { cls: "status", id: "seat-" + i + "-status" })),
        zone("hand", "seat-" + i + "-hand"), zone("face-up", "seat-" + i + "-face-up"),
        zone("face-down", "seat-" + i + "-face-down")));
    });
    var table = el("section", { id: "table-area" },
      el("div", { id: "pile-area" }, el("div", { id: "pile", cls: "cards" }), pileInfo), seats);
    var help = el("div", { id: "help", text: "Keys: \u2190/\u2192 previous/next, Home/End first/last, b next burn, u next pick-up." });
    fill(this.root, [el("header", null, title, meta, verify), controls, step, chart, table, el("footer", { id: "result" }), help].filter(Boolean));
    this.keys = function (e) { self.key(e); };
    document.addEventListener("keydown", this.keys);
  };

  var LINE_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

  // Each seat's win_prob (from its info) over the game: one line per seat that sent any.
  Viewer.prototype.winChart = function () {
    var d = this.data, n = Math.max(1, d.frames.length - 1), series = d.labels.map(function () { return []; });
    d.frames.forEach(function (f, k) {
      var t = f.i.thought;
      if (t && typeof t.win_prob === "number" && typeof f.i.seat === "number" && series[f.i.seat]) series[f.i.seat].push([k, t.win_prob]);
    });
    if (!series.some(function (p) { return p.length; })) return null;
    var NS = "http://www.w3.org/2000/svg", W = 1000, H = 100;
    function svg(tag, attrs) { var e = document.createElementNS(NS, tag); for (var a in attrs) e.setAttribute(a, attrs[a]); return e; }
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", role: "img", "aria-label": "win probability per seat" });
    [0, 0.5, 1].forEach(function (y) { root.appendChild(svg("line", { x1: 0, x2: W, y1: H - y * H, y2: H - y * H, stroke: "#ddd", "stroke-width": 1 })); });
    var legend = el("div", { cls: "legend" });
    series.forEach(function (pts, i) {
      if (!pts.length) return;
      var color = LINE_COLORS[i % LINE_COLORS.length];
      root.appendChild(svg("polyline", { id: "winprob-" + i, "data-seat": String(i), "data-points": String(pts.length), fill: "none", stroke: color,
        "stroke-width": 2, "vector-effect": "non-scaling-stroke",
        points: pts.map(function (p) { return (p[0] / n * W).toFixed(1) + "," + (H - p[1] * H).toFixed(1); }).join(" ") }));
      var key = el("span", { id: "winprob-key-" + i }, el("i"));
      key.firstChild.style.background = color;
      key.appendChild(document.createTextNode("seat " + i + ": " + d.labels[i]));
      legend.appendChild(key);
    });
    root.appendChild(svg("line", { id: "winprob-now", x1: 0, x2: 0, y1: 0, y2: H, stroke: "#999", "stroke-width": 1, "vector-effect": "non-scaling-stroke" }));
    this.chartScale = W / n;
    return el("section", { id: "winprob" }, el("div", { cls: "legend-title", text: "win probability each bot gave itself (its info.win_prob)" }), root, legend);
  };

  Viewer.prototype.destroy = function () { document.removeEventListener("keydown", this.keys); };

  Viewer.prototype.key = function (e) {
    var t = e.target, tag = t && t.tagName;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (tag === "SELECT" || tag === "TEXTAREA" || (tag === "INPUT" && t.type !== "range")) return;
    var n = this.data.frames.length - 1, k = null;
    if (tag === "INPUT" && (e.key === "ArrowLeft" || e.key === "ArrowRight" || e.key === "Home" || e.key === "End")) {
      e.preventDefault();  // the slider would move too: one step per key press
    }
    if (e.key === "ArrowRight") k = this.k + 1;
    else if (e.key === "ArrowLeft") k = this.k - 1;
    else if (e.key === "Home") k = 0;
    else if (e.key === "End") k = n;
    else if (e.key === "b" || e.key === "B") { this.jump("burn", "burn"); e.preventDefault(); return; }
    else if (e.key === "u" || e.key === "U") { this.jump("pickup", "pick-up"); e.preventDefault(); return; }
    if (k !== null) { e.preventDefault(); this.show(k); }
  };

  Viewer.prototype.jump = function (flag, word) {
    var f = this.data.frames;
    for (var j = this.k + 1; j < f.length; j++) {
      if (f[j].i.flags.indexOf(flag) >= 0) { this.show(j); return; }
    }
    this.show(this.k);
    document.getElementById("notice").textContent = "no " + word + " after turn " + this.k;
  };

  Viewer.prototype.show = function (k) {
    var d = this.data, n = d.frames.length - 1;
    k = Math.max(0, Math.min(n, k | 0));
    this.k = k;
    var f = d.frames[k], s = f.s, info = f.i, v = this.view, me = v === "all" ? null : parseInt(v, 10);
    var $ = function (id) { return document.getElementById(id); };
    this.root.setAttribute("data-turn", String(k));
    this.root.setAttribute("data-view", v);
    document.body.setAttribute("data-turn", String(k));
    $("slider").value = String(k);
    $("turn").textContent = "Turn " + k + " / " + n;
    $("notice").textContent = "";
    // What was done at this turn.
    var action = $("action");
    fill(action, []);
    var secret = me !== null && info.phase === "setup" && info.seat !== me && info.act &&
      (info.act.kind === "set_face_up" || info.act.kind === "stack");
    if (info.kind === "deal") {
      action.textContent = info.text;
      action.setAttribute("data-kind", "deal");
    } else {
      action.setAttribute("data-kind", info.kind);
      action.setAttribute("data-seat", String(info.seat));
      var text = info.name + ": " + (secret ? "chooses face-up cards" : info.text);
      action.appendChild(document.createTextNode(text));
      var extra = [];
      if (info.kind !== "forced" && info.ms !== null && info.ms !== undefined) extra.push(info.ms.toFixed(3) + " ms");
      if (info.kind === "action" && info.choice !== null && info.choice !== undefined) extra.push("action " + info.choice + " of " + info.of);
      if (extra.length) action.appendChild(el("span", { cls: "ms", text: "  (" + extra.join(", ") + ")" }));
    }
    fill($("events"), info.events.map(function (ev) {
      var text = (ev[1] !== null && me !== null && ev[1] !== me) ? ev[2] : ev[0];
      var cls = /^burn!/.test(text) ? "burn" : (/forfeits/.test(text) ? "forfeit" : "");
      return el("li", { cls: cls, text: text });
    }));
    var errs = (info.stderr || []);
    $("stderr").textContent = (me === null || info.seat === me) && errs.length ? errs.map(function (x) { return "stderr| " + x; }).join("\n") : "";
    var thought = $("thought");
    fill(thought, []);
    if (me === null || info.seat === me) {
      if (info.thought) thought.appendChild(document.createTextNode("thinking: " + thoughtText(info.thought)));
      if (info.thought_warning) thought.appendChild(el("span", { cls: "warn", text: (info.thought ? "  · " : "") + "info warning: " + info.thought_warning }));
    }
    var now = $("winprob-now");
    if (now) {
      now.setAttribute("x1", String(k * this.chartScale));
      now.setAttribute("x2", String(k * this.chartScale));
      d.labels.forEach(function (_, i) {
        var line = $("winprob-" + i), key = $("winprob-key-" + i), shown = me === null || me === i;
        if (line) line.style.display = shown ? "" : "none";
        if (key) key.style.display = shown ? "" : "none";
      });
    }
    $("mismatch").textContent = (info.mismatch || []).map(function (m) { return "MISMATCH " + m; }).join("\n");
    // The pile: the card that counts is marked; see-through cards above it are faded.
    fill($("pile"), s.pile.map(function (c, i) {
      var extra = i === s.top ? "top" : ((s.top === null || i > s.top) ? "glass" : "");
      var e = card(c, extra);
      if (i === s.top) e.setAttribute("data-top", "1");
      return e;
    }));
    if (!s.pile.length) $("pile").appendChild(el("span", { cls: "hidden-note", text: "(empty pile)" }));
    var beat = !s.pile.length ? "anything (empty pile)" : (s.beat === null ? "anything (a 2, or only see-through cards)" : s.beat);
    if (s.beat !== null && s.top !== null && s.top < s.pile.length - 1) beat += " (under " + (s.pile.length - 1 - s.top) + " see-through)";
    if (s.descending) beat += ", descending";
    if (s.need > 1) beat += ", at least " + s.need + " cards";
    $("beat").textContent = "to beat: " + beat;
    $("beat").setAttribute("data-beat", s.beat === null ? "" : s.beat);
    $("stock").textContent = "stock " + s.stock;
    $("stock").setAttribute("data-count", String(s.stock));
    $("burned").textContent = "burned " + s.burned;
    $("burned").setAttribute("data-count", String(s.burned));
    $("set-aside").textContent = "set aside " + s.set_aside;
    $("direction").textContent = s.direction > 0 ? "\u21bb ascending seats" : "\u21ba descending seats";
    $("to-move").textContent = s.over ? "game over" : "to move: " + d.labels[s.to_move];
    $("to-move").setAttribute("data-seat", s.over ? "" : String(s.to_move));
    // The seats.
    s.seats.forEach(function (seat, i) {
      var box = $("seat-" + i);
      box.className = "seat" + (!s.over && s.to_move === i ? " to-move" : "") + (info.seat === i ? " acted" : "") +
        (seat.place !== null ? " gone" : "");
      var status = seat.forfeit ? "forfeited: " + seat.forfeit : (seat.place !== null ? "out: place " + seat.place :
        (seat.setup ? "setup: " + seat.setup.replace("_", "-") : (!s.over && s.to_move === i ? "to move" : "")));
      $("seat-" + i + "-status").textContent = status;
      var mine = me === null || me === i;
      var hand;
      if (mine) {
        hand = seat.hand.map(function (c) { return card(c, seat.known.indexOf(c) >= 0 && me === null ? "known" : ""); });
      } else {
        hand = seat.known.map(function (c) { return card(c, "known"); });
        for (var h = seat.known.length; h < seat.hand.length; h++) hand.push(card("back"));
      }
      var handNode = $("seat-" + i + "-hand");
      fill(handNode, hand);
      handNode.setAttribute("data-count", String(seat.hand.length));
      var up = $("seat-" + i + "-face-up");
      if (!mine && s.phase === "setup") {
        fill(up, [el("span", { cls: "hidden-note", text: "hidden until play starts", "data-hidden": "1" })]);
      } else {
        fill(up, seat.up.map(function (st) {
          var g = el("span", { cls: "stack" });
          st.forEach(function (c) { g.appendChild(card(c)); });
          return g;
        }));
      }
      fill($("seat-" + i + "-face-down"), seat.down.map(function (c) {
        if (c === null) return card(null);
        return me === null ? card(c, "down") : card("back");
      }));
    });
    $("result").textContent = s.over ? "Result: " + d.result_text : "";
  };

  window.PalaceReplay = {
    mount: function (root, data) { return new Viewer(root, data); },
    decode: function (b64) {
      var bin = Uint8Array.from(atob(b64), function (ch) { return ch.charCodeAt(0); });
      if (typeof DecompressionStream === "undefined") return Promise.reject(new Error("this browser cannot decompress the embedded replays"));
      var stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("gzip"));
      return new Response(stream).text().then(JSON.parse);
    }
  };
})();
"""

SINGLE_BOOT = r"""
(function () {
  var data = JSON.parse(document.getElementById("replay-data").textContent);
  window.replay = PalaceReplay.mount(document.getElementById("replay"), data);
})();
"""

REPORT_BOOT = r"""
(function () {
  var current = null;
  function route() {
    var m = /^#game=(.+)$/.exec(location.hash);
    var report = document.getElementById("report"), box = document.getElementById("viewer");
    if (current) { current.destroy(); current = null; }
    if (!m) { report.hidden = false; box.hidden = true; box.innerHTML = ""; document.body.removeAttribute("data-turn"); return; }
    var id = decodeURIComponent(m[1]);
    var node = document.querySelector('script[data-game="' + CSS.escape(id) + '"]');
    report.hidden = true; box.hidden = false;
    box.innerHTML = '<a id="back" href="#">\u2190 back to the report</a><div id="replay" class="replay">loading\u2026</div>';
    if (!node) { document.getElementById("replay").textContent = "no replay embedded for " + id; return; }
    PalaceReplay.decode(node.textContent.trim()).then(function (data) {
      if (location.hash !== m[0]) return;
      current = window.replay = PalaceReplay.mount(document.getElementById("replay"), data);
    }, function (err) { document.getElementById("replay").textContent = String(err); });
  }
  window.addEventListener("hashchange", route);
  route();
})();
"""


JS_SAFE_INT = 2**53 - 1  # larger integers lose digits as JavaScript numbers


def for_browser(data: Any) -> Any:
    """Integers a browser cannot hold exactly (63-bit seeds) as strings, everything else as it is."""
    if isinstance(data, bool):
        return data
    if isinstance(data, int):
        return str(data) if abs(data) > JS_SAFE_INT else data
    if isinstance(data, dict):
        return {k: for_browser(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [for_browser(v) for v in data]
    return data


def _json_for_script(data: Any) -> str:
    """JSON that can sit inside a ``<script>`` element: no ``<`` at all (``\\u003c`` in strings)."""
    return json.dumps(for_browser(data), separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


def _page(title: str, body: str, scripts: list[str], stylesheet: str = "") -> str:
    js = "".join(f"<script>{s}</script>\n" for s in scripts)
    if stylesheet:  # dressed as the server's pages: its stylesheet, header and main column
        body = f"<header class=\"top\"><span class=\"brand\">\u2660 Palace Arena</span></header>\n<main>\n{body}\n</main>"
    style = stylesheet.replace("</", "<\\/")  # a stylesheet cannot end the <style> element early
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{style}{CSS}</style>\n</head>\n<body>\n{body}\n{js}</body>\n</html>\n")


def replay_html(data: dict[str, Any]) -> str:
    """One game as a self-contained page; ``data`` is :func:`arena.replay.view.replay_data`."""
    body = (f"<main id=\"replay\" class=\"replay\" data-game=\"{html.escape(str(data['game']))}\">"
            f"<noscript>This replay needs JavaScript.</noscript></main>\n"
            f"<script type=\"application/json\" id=\"replay-data\">{_json_for_script(data)}</script>")
    return _page(f"Replay {data['game']}", body, [JS, SINGLE_BOOT])


def safe_name(game_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", game_id) or "game"


def _standings_table(lines: list[Line]) -> str:
    """The same columns and text as `arena standings` (arena.tournament.standings formats both)."""
    from ..tournament.standings import elo_text, los_text, ms_text, rate_text
    rows = []
    for i, l in enumerate(lines, 1):
        faults = ", ".join(f"{k} {v}" for k, v in sorted(l.faults.items())) or "0"
        cells = [str(i), l.bot, elo_text(l.elo, l.elo_low, l.elo_high, l.rated, l.games), str(l.games),
                 rate_text(l.win_rate, l.win_low, l.win_high, l.games), f"{l.avg_place:.2f}",
                 rate_text(l.draw_rate, l.draw_low, l.draw_high, l.games), faults, los_text(l.los_next), ms_text(l)]
        rows.append("<tr>" + "".join(f"<td{'' if k in (1, 7) else ' class=num'}>{html.escape(c)}</td>"
                                     for k, c in enumerate(cells)) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("#", "bot", "Elo ± 95%", "games", "win % [95%]", "avg place",
                                              "draw % [95%]", "faults", "LOS↓", "ms/decision"))
    return (f"<div class=\"scroll\"><table class=\"list\" id=\"standings\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _order_text(g: dict[str, Any]) -> str:
    parts, place = [], 1
    for group in g["result"].get("order", []):
        parts.append(f"{place}. " + ", ".join(g["seats"][s] for s in group))
        place += len(group)
    return "  ".join(parts)


def stages_html(fmt: str, stages: list[Any], champion: str | None = None, *,
                authors: dict[str, str] | None = None, stored: Any = None) -> str:
    """A staged event as columns, one per stage: each table's bots with their seat (in the table's
    first game; every rotation follows), author where known, the Elo a Swiss paired them on, and
    points once played, best first, who went on in bold; byes, and a Swiss round's account of what
    its pairing minimised. ``stored`` (game indexes the store holds) marks a stage still in play."""
    from ..tournament.formats import stage_rows
    authors = authors or {}
    cols = []
    for stage in stages:
        boxes = []
        for table, (cells, went_on) in zip(stage.tables, stage_rows(fmt, stage)):
            rows = []
            for b, p in cells:
                who = f"<small class=\"author\">{html.escape(authors[b])}</small>" if b in authors else ""
                elo = (f"<small class=\"elo\" title=\"Elo it was paired on\">{stage.scores[b]:.0f}</small>"
                       if b in stage.scores else "")
                rows.append(f"<div class=\"{'went-on' if b in went_on else ''}\"><span><small class=\"seat\" "
                            f"title=\"seat in the table's first game\">{table.index(b) + 1}</small> "
                            f"{html.escape(b)} {who}</span><span>{elo} {'' if p is None else f'{p:g}'}</span></div>")
            boxes.append(f"<div class=\"table\">{''.join(rows)}</div>")
        extra = ""
        if stored is not None and not stage.points:
            done = sum(g.index in stored for g in stage.games)
            extra += f"<p class=\"in-play\">in play: {done} of {len(stage.games)} games stored</p>"
        if stage.byes:
            extra += (f"<p class=\"waiting\">{'byes' if fmt == 'swiss' else 'waiting'}: "
                      f"{html.escape(', '.join(stage.byes))}</p>")
        if fmt == "swiss" and stage.pairing is not None:
            extra += f"<p class=\"note minimised\">minimised: {html.escape(stage.pairing.minimised())}</p>"
        cols.append(f"<section><h3>{html.escape(stage.title)}</h3>{''.join(boxes)}{extra}</section>")
    won = f"<section><h3>winner</h3><div class=\"table went-on\">{html.escape(champion)}</div></section>" \
        if champion else ""
    title = "Rounds" if fmt == "swiss" else "Bracket"
    elo = " The small figure before the points: the Elo the round was paired on." if fmt == "swiss" else ""
    return (f"<h2>{title}</h2><div class=\"bracket\" id=\"stages\">{''.join(cols)}{won}</div>"
            "<p class=\"note\">Each bot with its seat in the table's first game (every table plays each deal "
            "in every seat rotation). Points per table: 1 per seat finished behind and ½ per seat tied, over every "
            f"game of the table.{elo}</p>")


def report_html(tournament: dict[str, Any] | None, name: str, lines: list[Line], games: list[dict[str, Any]],
                replays: dict[str, dict[str, Any]], *, links: dict[str, str] | None = None,
                stages: str = "", stylesheet: str = "") -> str:
    """Standings and the games table; each game links to its replay.

    ``stages``: a staged event's rounds or bracket (:func:`stages_html`). ``stylesheet``: CSS
    inlined before the replay's own (``arena report --html`` gives the server's ``site.css``, so
    a report looks like the server's pages and still needs no other file).
    Without ``links`` every replay is embedded (gzip + base64, decoded and drawn only
    when opened: ``#game=ID``). With ``links`` (game id -> relative URL) rows link to
    separate replay files instead.
    """
    rows = []
    for g in games:
        gid = g["id"]
        data = replays.get(gid)
        ok = data is None or data["verify"]["ok"]
        href = links[gid] if links is not None and gid in links else f"#game={html.escape(gid)}"
        forf = ", ".join(f"{g['seats'][int(s)]}: {r}" for s, r in g["result"].get("forfeits", {}).items())
        check = "ok" if data is not None and ok else ("MISMATCH" if data is not None else "no log")
        rows.append(f"<tr class=\"{'' if ok else 'bad'}\" data-game=\"{html.escape(gid)}\">"
                    f"<td><a class=\"game-link\" href=\"{html.escape(href)}\" data-game=\"{html.escape(gid)}\">{html.escape(gid)}</a></td>"
                    f"<td class=num>{g['index']}</td><td>{html.escape(' vs '.join(g['seats']))}</td>"
                    f"<td>{html.escape(g['reason'])}{' (draw)' if g['draw'] else ''}</td>"
                    f"<td>{html.escape(_order_text(g))}</td><td class=num>{g['turns']}</td>"
                    f"<td>{html.escape(forf)}</td><td>{check}</td></tr>")
    info = ""
    if tournament:
        cfg = tournament.get("config", {})
        info = (f"<p id=\"tournament-info\">{html.escape(str(cfg.get('format', '')))} · rules "
                f"{html.escape(str(cfg.get('rules', '?')))} · {cfg.get('seats', '?')} seats · "
                f"{tournament.get('played', len(games))} of {tournament.get('planned', '?')} games played · "
                f"status {html.escape(str(tournament.get('status', '?')))}</p>")
    mode = ("Each game id opens its replay, embedded in this file." if links is None
            else "Each game id opens its replay file (kept in the folder beside this report).")
    body = (f"<div id=\"report\" class=\"replay\"><h1>Tournament {html.escape(name)}</h1>{info}"
            f"<h2>Standings</h2>{_standings_table(lines)}{stages}"
            f"<h2>Games ({len(games)})</h2><p>{mode}</p>"
            "<div class=\"scroll\"><table class=\"list\" id=\"games\"><thead><tr><th>game</th><th>#</th><th>seats</th>"
            "<th>end</th><th>order</th><th>turns</th><th>forfeits</th><th>replay check</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div></div>\n<div id=\"viewer\" hidden></div>")
    if links is None:
        blobs = []
        for gid, data in replays.items():
            packed = base64.b64encode(gzip.compress(json.dumps(for_browser(data), separators=(",", ":")).encode(), 9, mtime=0))
            blobs.append(f"<script type=\"application/gzip-base64\" data-game=\"{html.escape(gid)}\">"
                         f"{packed.decode()}</script>")
        body += "\n" + "\n".join(blobs)
        return _page(f"Tournament {name}", body, [JS, REPORT_BOOT], stylesheet)
    return _page(f"Tournament {name}", body, [], stylesheet)


def write_report_folder(out: Path, replays: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Write each replay as its own page in ``<out stem>-replays/``; the links, relative to ``out``."""
    folder = out.with_name(out.stem + "-replays")
    folder.mkdir(parents=True, exist_ok=True)
    links = {}
    for gid, data in replays.items():
        path = folder / f"{safe_name(gid)}.html"
        write_private_text(path, replay_html(data))
        links[gid] = f"{folder.name}/{path.name}"
    return links
