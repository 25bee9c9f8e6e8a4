// KV planner page: draws the heatmap and the TTFT band's chart from the figures the server embeds
// (json_script), switches the preset picker to "config.json" when one is pasted or uploaded, and
// while the TTFT band is computing swaps in its section (and redraws its chart) as the server
// renders it, until it is done.
(function () {
  "use strict";

  function draw(source, target, options) {
    if (!source || !target || !window.Plotly) return;
    const figure = JSON.parse(source.textContent);
    const config = Object.assign({ responsive: true, displaylogo: false }, options);
    window.Plotly.newPlot(target, figure.data, figure.layout, config).then(() => {
      target.dataset.drawn = "true";
    });
  }

  function drawFigure() {
    draw(document.getElementById("planner-figure"), document.getElementById("planner-chart"));
  }

  // The band's chart, drawn again each time its section is swapped in with more tiers.
  function drawBand() {
    const target = document.querySelector("[data-band-figure]");
    // No mode bar: its buttons inside an element with role="img" are nested controls (axe).
    const options = { displayModeBar: false };
    if (target) draw(document.getElementById(target.dataset.bandFigure), target, options);
  }

  function preferPastedConfig() {
    const preset = document.getElementById("id_model");
    const useConfig = () => {
      if (preset) preset.value = "";
    };
    const text = document.getElementById("id_config_text");
    const file = document.getElementById("id_config_file");
    if (text) text.addEventListener("input", () => text.value.trim() && useConfig());
    if (file) file.addEventListener("change", () => file.files.length && useConfig());
  }

  const POLL_MS = 2000;

  function followBand() {
    const section = document.getElementById("ttft-band");
    const url = section && section.dataset.poll;
    if (!url) return;
    setTimeout(() => {
      fetch(url, { credentials: "same-origin" })
        .then((response) => (response.ok ? response.text() : Promise.reject(response.status)))
        .then((html) => {
          section.outerHTML = html;
          drawBand();
          followBand();
        })
        .catch((status) => {
          // a refusal (signed out, gone) stays one; a network error is tried again later
          if (!(status >= 400 && status < 500)) setTimeout(followBand, POLL_MS * 4);
        });
    }, POLL_MS);
  }

  drawFigure();
  drawBand();
  preferPastedConfig();
  followBand();
})();
