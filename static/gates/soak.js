// The soak page: draws the soak's figure, redraws a zoomed range from its own samples (full
// resolution once few enough), and polls the same route while the soak runs.
(function () {
  "use strict";
  const card = document.getElementById("soak-view");
  const target = card && card.querySelector("[data-soak-figure]");
  if (!target || !window.Plotly) return;
  const CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };
  const POLL_MS = 15000;
  let range = null; // [from_h, to_h] while zoomed
  let drawing = false;

  function cell(text, header) {
    const element = document.createElement(header ? "th" : "td");
    if (header) element.scope = "row";
    element.textContent = text === null || text === undefined ? "n/a" : String(text);
    return element;
  }

  function fillTable(rows) {
    const body = card.querySelector("[data-soak-table]");
    body.replaceChildren(...rows.map((row) => {
      const line = document.createElement("tr");
      line.append(cell(row.series, true));
      for (const key of ["unit", "windows", "first", "min", "median", "max", "last"]) {
        line.append(cell(row[key]));
      }
      return line;
    }));
    card.querySelector('[data-soak-field="caption"]').textContent = range
      ? `Hours ${range[0].toFixed(3)} to ${range[1].toFixed(3)}`
      : "Over the whole soak";
  }

  async function draw(figure) {
    drawing = true;
    try {
      await window.Plotly.react(target, figure.data, figure.layout, CONFIG);
    } finally {
      drawing = false;
    }
    target.dataset.drawn = "true";
  }

  async function load() {
    const url = new URL(card.dataset.series, window.location.href);
    if (range) {
      url.searchParams.set("from_h", range[0]);
      url.searchParams.set("to_h", range[1]);
    }
    const status = card.querySelector('[data-soak-field="status"]');
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const body = await response.json();
      await draw(body.figure);
      fillTable(body.table);
      status.textContent = `${body.shown} of ${body.windows} windows in view`;
      card.dataset.live = body.live ? "true" : "false";
    } catch (problem) {
      status.textContent = `Could not update the chart (${problem.message}); retrying.`;
    }
  }

  draw(JSON.parse(document.getElementById("soak-figure").textContent)).then(() => {
    target.on("plotly_relayout", (change) => {
      if (drawing) return;
      // Panels share one x axis, but the change names the axis of the panel zoomed in.
      const keys = Object.keys(change);
      if (keys.some((key) => /^xaxis\d*\.autorange$/.test(key))) {
        if (range) { range = null; load(); }
        return;
      }
      const lowKey = keys.find((key) => /^xaxis\d*\.range\[0\]$/.test(key));
      if (!lowKey) return;
      const low = change[lowKey], high = change[lowKey.replace("[0]", "[1]")];
      if (low === undefined || high === undefined) return;
      range = [Number(low), Number(high)];
      load();
    });
  });
  window.setInterval(() => {
    if (card.dataset.live === "true" && !document.hidden) load();
  }, POLL_MS);
})();
