// KV planner page: draws the heatmap from the figure the server embeds (json_script), and
// switches the preset picker to "config.json" when one is pasted or uploaded.
(function () {
  "use strict";

  function drawFigure() {
    const source = document.getElementById("planner-figure");
    const target = document.getElementById("planner-chart");
    if (!source || !target || !window.Plotly) return;
    const figure = JSON.parse(source.textContent);
    window.Plotly.newPlot(target, figure.data, figure.layout, {
      responsive: true,
      displaylogo: false,
    });
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

  drawFigure();
  preferPastedConfig();
})();
