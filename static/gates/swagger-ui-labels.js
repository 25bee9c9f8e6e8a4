// Swagger UI builds its parameter and content-type controls without labels (axe: label,
// select-name) and its scrolling code blocks out of the tab order (scrollable-region-focusable).
// Each control gets the name a screen reader should say, from its row or its role, and each code
// block a tab stop, as Swagger renders them; nothing else on the page is touched.
(function () {
  "use strict";
  function nameFor(control) {
    const row = control.closest("tr[data-param-name]");
    if (row) {
      const where = row.getAttribute("data-param-in");
      return row.getAttribute("data-param-name") + (where ? " (" + where + ")" : "");
    }
    if (control.closest(".content-type-wrapper, .response-control-media-type")) {
      return "Media type";
    }
    if (control.closest(".servers")) return "Server";
    if (control.closest(".body-param")) return "Request body";
    return control.getAttribute("placeholder") || control.getAttribute("title") || "";
  }
  function reachable(root) {
    root.querySelectorAll(".highlight-code pre, pre.microlight").forEach(function (block) {
      if (!block.hasAttribute("tabindex")) block.setAttribute("tabindex", "0");
    });
  }
  function label(root) {
    root.querySelectorAll("select, input, textarea").forEach(function (control) {
      if (control.hasAttribute("aria-label") || control.labels && control.labels.length) return;
      const name = nameFor(control);
      if (name) control.setAttribute("aria-label", name);
    });
  }
  const target = document.getElementById("swagger-ui");
  if (!target) return;
  new MutationObserver(function () {
    label(target);
    reachable(target);
  }).observe(target, {
    childList: true,
    subtree: true,
  });
})();
