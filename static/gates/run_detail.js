// Live status of a run: polls the run's API entry until it ends, then reloads once for the verdict.
(function () {
  "use strict";
  const card = document.getElementById("run-status");
  if (!card || card.dataset.ended === "true") return;
  const field = (name) => card.querySelector(`[data-field="${name}"]`);
  const logBox = document.querySelector('[data-field="log"]');

  async function poll() {
    let run;
    try {
      const response = await fetch(card.dataset.api, { headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(response.status);
      run = await response.json();
    } catch (error) {
      setTimeout(poll, 5000);
      return;
    }
    field("state").textContent = run.state;
    field("state").className = `badge run-${run.state}`;
    field("outcome").textContent = run.outcome;
    field("progress").max = Math.max(run.progress.total, 1);
    field("progress").value = run.progress.done;
    field("progress-text").textContent = `${run.progress.done}/${run.progress.total} steps`;
    field("reason").textContent = run.reason;
    if (logBox && run.log_tail !== undefined) logBox.textContent = run.log_tail;
    if (run.state === "finished" || run.state === "canceled") {
      window.location.reload();
      return;
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 1000);
})();
