/* The game page's replay. Its turn and seat live in the address (#t37/s1: turn 37 as seat 1
   sees it; #t37: everyone's cards), so "look at move 37" is a link; opening one restores it. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("replay-data").textContent);
  var replay = window.replay = PalaceReplay.mount(document.getElementById("replay"), data);
  var show = replay.show;
  var seats = data.labels.length, last = data.frames.length - 1;

  function restore() {
    var m = /^#t(\d+)(?:\/s(\d+))?$/.exec(location.hash);
    if (!m) return;
    var seat = m[2] === undefined ? "all" : m[2];
    if (seat !== "all" && Number(seat) >= seats) seat = "all";
    replay.view = seat;
    document.getElementById("view").value = seat;
    show.call(replay, Math.min(Number(m[1]), last));
  }

  replay.show = function (k) {  // every move of the viewer, by button, key, slider or seat
    show.call(replay, k);
    var hash = "#t" + replay.k + (replay.view === "all" ? "" : "/s" + replay.view);
    if (location.hash !== hash) history.replaceState(null, "", hash);
  };
  window.addEventListener("hashchange", restore);
  restore();
})();
