/* Charts by tap as well as by hover: tapping a rating series selects it (its interval band shows)
   and writes its line (rating, interval, games) under the chart; tapping it again clears it.
   Delegated from the document, so a chart a live refresh replaced works the same. */
(function () {
  "use strict";
  function note(chart) {
    var id = chart.id + "-note", p = document.getElementById(id);
    if (!p) {
      p = document.createElement("p");
      p.id = id;
      p.className = "chart-note";
      p.setAttribute("aria-live", "polite");
      chart.parentNode.insertBefore(p, chart.nextSibling);
    }
    return p;
  }
  document.addEventListener("click", function (e) {
    var series = e.target.closest ? e.target.closest(".chart .series") : null;
    if (!series) return;
    var chart = series.closest("svg"), was = series.classList.contains("selected");
    chart.querySelectorAll(".series.selected").forEach(function (s) { s.classList.remove("selected"); });
    var title = series.querySelector("title");
    note(chart).textContent = was ? "" : (title ? title.textContent : "");
    if (!was) series.classList.add("selected");
  });
})();
