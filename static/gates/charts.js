// Gate and run pages: draws every [data-figure] element from the Plotly figure the server
// embeds beside it (json_script, id = the element's data-figure). plotly.js comes from static.
(function () {
  "use strict";
  const CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };

  function draw(target) {
    const source = document.getElementById(target.dataset.figure);
    if (!source) return;
    const figure = JSON.parse(source.textContent);
    window.Plotly.newPlot(target, figure.data, figure.layout, CONFIG).then(() => {
      target.dataset.drawn = "true";
    });
  }

  if (!window.Plotly) return;
  document.querySelectorAll("[data-figure]").forEach(draw);
})();
