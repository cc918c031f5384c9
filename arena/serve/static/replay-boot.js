(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("replay-data").textContent);
  window.replay = PalaceReplay.mount(document.getElementById("replay"), data);
})();
