// Draws every chart of the report from its ECharts option (made in pipeline/report.py) and
// wires the range buttons. Renders as SVG: sharp when zoomed, and countable by a test.
(function () {
  "use strict";
  var options = JSON.parse(document.getElementById("charts").textContent);
  var charts = [];
  // Names come from the service: a tooltip (HTML) shows them as text, never as markup.
  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  // A bar chart that lists bots carries each bar's tooltip lines (name, id, what happened).
  function hoverTooltip(option) {
    var hover = option.hover;
    delete option.hover;
    option.tooltip.formatter = function (params) {
      var p = Array.isArray(params) ? params[0] : params;
      var lines = (hover[p.dataIndex] || []).filter(function (l) { return l; }).map(esc);
      lines.push(esc(p.seriesName) + ": " + esc(Number(p.value).toLocaleString("en")));
      return lines.join("<br>");
    };
  }
  Object.keys(options).forEach(function (id) {
    var el = document.getElementById(id);
    if (options[id].hover) hoverTooltip(options[id]);
    var chart = echarts.init(el, null, { renderer: "svg" });
    options[id].animation = false;  // drawn at once: a print or a screenshot shows it all
    chart.setOption(options[id]);
    charts.push(chart);
  });
  window.addEventListener("resize", function () {
    charts.forEach(function (c) { c.resize(); });
  });
  var DAY = 86400000;
  document.querySelectorAll(".ranges button").forEach(function (button) {
    button.addEventListener("click", function () {
      var days = Number(button.dataset.days);
      document.querySelectorAll(".ranges button").forEach(function (b) {
        b.classList.toggle("on", b === button);
      });
      charts.forEach(function (chart) {
        var option = chart.getOption();
        if (!option.dataZoom || !option.dataZoom.length) return;
        var end = -Infinity;
        // The first series is the history: a forecast band runs past it.
        (option.series[0].data || []).forEach(function (p) {
          if (Array.isArray(p) && p[1] !== null) end = Math.max(end, Date.parse(p[0]));
        });
        if (days === 0 || !isFinite(end)) {
          chart.dispatchAction({ type: "dataZoom", start: 0, end: 100 });
        } else {
          chart.dispatchAction({ type: "dataZoom", startValue: end - days * DAY, endValue: end });
        }
      });
    });
  });
  document.body.dataset.chartsReady = String(charts.length);
})();
