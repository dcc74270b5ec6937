"""The report as a person reads it, in a real headless Chromium: bots named as the service names
them (ids on hover), a directory's planted events at the top of the anomaly section, and names
that hold markup, a `</script>`, an SVG `onload` or template syntax shown as text, never run.

A probe script appended to a copy of the report reads what the page shows once its charts are
drawn: the bot cells of every table, the text of every chart's SVG, and each bar's (and each
line chart's first) tooltip, opened as a hover would, into a `<pre id="probe">` of the dumped
DOM."""

from __future__ import annotations

import html
import json
import re
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import EXPORTED_SERVICE, harvest_settings_for, start_service
from test_report import chart_options, chromium

from pipeline.analytics.report._report import build_report
from pipeline.core._settings import Settings
from pipeline.operate._runner import run
from pipeline.service import Directory, ServiceConfig
from pipeline.service._data import HOSTILE_CUSTOM, HOSTILE_NAMES

pytestmark = pytest.mark.slow

PROBE = """<script>
(function () {
  var out = {cells: [], charts: {}, tips: {}, headings: [], heads: []};
  document.querySelectorAll("h2").forEach(function (h) { out.headings.push(h.textContent); });
  document.querySelectorAll("th").forEach(function (th) {
    out.heads.push({text: th.textContent, title: th.title});
  });
  document.querySelectorAll("td.bot").forEach(function (td) {
    out.cells.push({id: td.title, text: td.textContent,
                    section: td.closest("section").id, html: td.innerHTML});
  });
  document.querySelectorAll(".chart").forEach(function (el) {
    var chart = echarts.getInstanceByDom(el);
    var option = chart.getOption();
    var texts = [];
    el.querySelectorAll("svg text").forEach(function (t) { texts.push(t.textContent); });
    out.charts[el.id] = texts;
    var bars = option.series[0] && option.series[0].type === "bar" && option.yAxis &&
      option.yAxis[0].type === "category";
    var n = bars ? option.series[0].data.length : Math.min(1, (option.series[0] || {data: []}).data.length);
    var tips = [];
    for (var i = 0; i < n; i++) {
      chart.dispatchAction({type: "showTip", seriesIndex: 0, dataIndex: i});
      var box = Array.prototype.filter.call(el.querySelectorAll("div"), function (d) {
        return d.style.zIndex === "9999999";
      })[0];
      if (box) tips.push({text: box.textContent, html: box.innerHTML});
    }
    out.tips[el.id] = tips;
  });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def read_page(report: Path, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """Open a copy of ``report`` with the probe in Chromium: (what the probe read, the DOM)."""
    probed = tmp_path / "probed.html"
    page, end = report.read_text().rsplit("</body>", 1)  # the library holds the word too
    probed.write_text(page + PROBE + "</body>" + end)
    proc = chromium(tmp_path, probed.as_uri(), "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if "CONSOLE" in line] == []
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:]
    return json.loads(html.unescape(found.group(1))), proc.stdout


def bar_labels(options: dict[str, dict[str, Any]]) -> list[str]:
    return [label for o in options.values() if isinstance(o.get("yAxis"), dict)
            for label in o["yAxis"]["data"]]


# --- names where ids were ----------------------------------------------------------------------
def test_the_report_names_bots_where_ids_were(exported_archive: Settings, tmp_path: Path) -> None:
    report = build_report(exported_archive, out=tmp_path / "report.html").path
    names = {b: Directory(ServiceConfig(**EXPORTED_SERVICE)).bot(b)["name"]  # type: ignore[index]
             for b in Directory(ServiceConfig(**EXPORTED_SERVICE)).bot_ids()}
    seen, dom = read_page(report, tmp_path)
    cells = seen["cells"]
    # Movers, ranks, anomalies and health all list bots, each by its name, the id on hover.
    assert {c["section"] for c in cells} >= {"movers", "ranks", "anomalies"}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    for cell in cells:
        name = names[cell["id"]]
        want = f"{name} {cell['id']}" if name in shared else name
        assert cell["text"] == want, cell
    # No table cell of those sections shows a bare id where a name was.
    ids = set(names)
    directory = re.sub(r'<section id="bot-.*', "", dom, flags=re.S)
    assert not [i for i in ids if f"<td>{i}</td>" in directory]
    # The bar charts rank bots by name; their tooltips give the name and the id.
    options = chart_options(report.read_text())
    labels = bar_labels(options)
    assert labels and set(labels) <= {n for n in names.values()} | {
        f"{n} (…{b[-6:]})" for b, n in names.items()}
    bar_tips = [t["text"] for chart, ts in seen["tips"].items() for t in ts
                if isinstance(options[chart].get("yAxis"), dict)]
    assert bar_tips and all(any(f"{names[b]}{b}" in tip for b in ids) for tip in bar_tips), \
        bar_tips[:3]
    # The labels are drawn (SVG text), not just asked for.
    drawn = {text for texts in seen["charts"].values() for text in texts}
    assert set(labels) & drawn


# --- planted events lead the anomaly section ---------------------------------------------------
PLANTED = {"bots": 60, "history_days": 45, "stats_per_day": 1, "events": 0.5, "seed": 3,
           "end": datetime(2026, 11, 1, 12)}


@pytest.fixture(scope="module")
def planted_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A directory with planted events, harvested and exported; its report and the truth."""
    root = tmp_path_factory.mktemp("planted")
    with start_service(**PLANTED) as svc:
        settings = harvest_settings_for(svc, root / "archive.ducklake",
                                        {"exports.dir": str(root / "exports")})
        assert run(settings).status == "complete"
        truth = httpx.get(f"{svc.base_url}/_admin/events").json()["events"]
    return build_report(settings, out=root / "report.html").path, truth


def week_rows(dom: str) -> list[tuple[str, str, str]]:
    """(bot id, what, day) of the "This week" table, top to bottom."""
    section = dom[dom.index('<section id="anomalies">'):]
    table = section[section.index("This week: the events that matter most"):]
    table = table[:table.index("</table>")]
    return [(bot, html.unescape(what), day) for bot, what, day in re.findall(
        r'<td class="bot" title="(\d+)">.*?</td><td>(.*?)</td><td>.*?</td><td>([\d-]+)</td>',
        table)]


def test_planted_events_lead_the_anomaly_section(planted_report: tuple[Path, list[dict[str, Any]]],
                                                 tmp_path: Path) -> None:
    report, truth = planted_report
    _, dom = read_page(report, tmp_path)
    rows = week_rows(dom)
    last = date(2026, 11, 1)
    # (An outage is known when the bot is back: one that lasts to the last day is not yet.)
    week = [e for e in truth if e["anomaly"] and e["kind"] != "counter_reset"
            and last - timedelta(days=7) < _dated(e) <= last]
    assert len(week) >= 3, "the fixture's data plants events in its last week"
    # The section leads with them: each of its top rows is a planted event of that bot and day
    # (or a spiky bot's own routine spike: a real one), and all but one at most of the week's
    # planted events are there (one may be near the floor, or run on from a bot's spike).
    real = week + [e for e in truth if e["kind"] == "routine_spike"]
    for bot, what, day in rows:
        assert any(e["bot_id"] == bot and _dated(e).isoformat() == day for e in real), (
            bot, what, day)
    led = [e for e in week if any(r[0] == e["bot_id"] and r[2] == _dated(e).isoformat()
                                  for r in rows)]
    assert len(led) >= min(5, len(week)) - 1, (rows, week)
    # ... the one that moved the most users first (severity orders them).
    options = chart_options(report.read_text())
    moved = [o for o in options.values() if o["title"]["text"].startswith("This week's events")]
    assert moved and moved[0]["series"][0]["data"][::-1] == sorted(
        moved[0]["series"][0]["data"], reverse=True)


def _dated(event: dict[str, Any]) -> date:
    """The day an event's row is dated: its first day; an outage's, the day it ended."""
    if event["kind"] == "outage":
        return date.fromisoformat(event["last_day"]) + timedelta(days=1)
    return date.fromisoformat(event["first_day"])


# --- hostile names -----------------------------------------------------------------------------
def test_hostile_names_are_shown_as_text_and_never_run(tmp_path: Path) -> None:
    with start_service(bots=16, history_days=40, stats_per_day=1, events=1.0, seed=5,
                       end=datetime(2026, 11, 1, 12), hostile_names=True) as svc:
        settings = harvest_settings_for(svc, tmp_path / "archive.ducklake",
                                        {"exports.dir": str(tmp_path / "exports")})
        assert run(settings).status == "complete"
        hostile = [b for b in svc.directory.bot_ids()
                   if svc.directory.bot(b)["name"] in HOSTILE_NAMES]  # type: ignore[index]
    assert len(hostile) >= 4
    report = build_report(settings, out=tmp_path / "report.html", bot_ids=hostile[:4],
                          compare=True).path
    seen, dom = read_page(report, tmp_path)
    body = re.search(r"<body[^>]*>", dom)
    assert body and "pwned" not in body.group(0)  # no payload ran
    assert "<title>botstats report</title>" in dom
    # Each name is there as text: its section's heading (with its id), the compare table's
    # head, the charts' SVG text and the tooltips; a tooltip's markup is the name escaped.
    by_id = {b: n for b, n in zip(hostile, HOSTILE_NAMES * 2, strict=False)}
    for bot in hostile[:len(HOSTILE_NAMES)]:
        assert f"{by_id[bot]} ({bot})" in seen["headings"], bot
        assert {"text": by_id[bot], "title": bot} in seen["heads"], bot
    for cell in seen["cells"]:  # any table that lists one of them
        assert cell["text"].startswith(by_id.get(cell["id"], "")), cell
    svg = "\n".join(t for texts in seen["charts"].values() for t in texts)
    tips = [t for ts in seen["tips"].values() for t in ts]
    for name in HOSTILE_NAMES:
        assert name in svg, name  # the compare chart's legend; bar labels are cut to width
        assert any(name in t["text"] for t in tips), name
    for tip in tips:
        assert "<img" not in tip["html"] and "<svg" not in tip["html"]
        assert "<script" not in tip["html"]
    # A custom field's name holding markup: the custom series' legend, as text.
    for label in HOSTILE_CUSTOM.values():
        if label in svg or any(label in t["text"] for t in tips):
            break
    else:
        pytest.fail("no custom field name with markup was shown")
