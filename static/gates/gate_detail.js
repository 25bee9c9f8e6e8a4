// Gate page: while a run of the gate is queued or running, polls its API entry and moves its
// row's state and progress; when one ends, reloads once so the verdict and charts appear.
(function () {
  "use strict";
  const rows = Array.from(document.querySelectorAll("tr[data-run-api]"));
  if (!rows.length) return;

  async function pollRow(row) {
    try {
      // An offset past the log's end: the answer carries no log text, only the run's state.
      const response = await fetch(`${row.dataset.runApi}?after=999999999999`, {
        headers: { Accept: "application/json" },
      });
      if (!response.ok) throw new Error(response.status);
      const run = await response.json();
      const state = row.querySelector('[data-field="state"]');
      state.textContent = run.state;
      state.className = `badge run-${run.state}`;
      row.querySelector('[data-field="progress"]').max = Math.max(run.progress.total, 1);
      row.querySelector('[data-field="progress"]').value = run.progress.done;
      row.querySelector('[data-field="progress-text"]').textContent =
        `${run.progress.done}/${run.progress.total}`;
      return run.state === "finished" || run.state === "canceled";
    } catch (error) {
      return false;
    }
  }

  async function poll() {
    const ended = await Promise.all(rows.map(pollRow));
    if (ended.some(Boolean)) {
      window.location.reload();
      return;
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 1500);
})();
