// Live run page: polls the run's API entry until it ends, moving the progress bar and appending
// what the log gained since the last poll (`?after=<offset>`); the log box follows the tail
// unless the reader scrolled up. Reloads once at the end for the verdict and the files.
(function () {
  "use strict";
  const card = document.getElementById("run-status");
  const logBox = document.querySelector('[data-field="log"]');
  const NEAR_BOTTOM_PX = 40;
  const followTail = () => logBox && (logBox.scrollTop = logBox.scrollHeight);
  followTail();
  if (!card || card.dataset.ended === "true") return;
  const field = (name) => card.querySelector(`[data-field="${name}"]`);
  let next = Number(card.dataset.logNext || 0);

  function appendLog(window) {
    if (!logBox || !window.text) return;
    const atBottom = logBox.scrollHeight - logBox.scrollTop - logBox.clientHeight < NEAR_BOTTOM_PX;
    if (window.skipped) logBox.textContent += "\n[… lines skipped …]\n";
    logBox.textContent += window.text;
    if (atBottom) followTail();
  }

  function show(run) {
    field("state").textContent = run.state;
    field("state").className = `badge run-${run.state}`;
    field("outcome").textContent = run.outcome;
    // A finished run never reads "2/3 steps": a soak's last step ends with its collector.
    const completed = run.outcome === "completed";
    const ended = run.state === "finished" || run.state === "canceled";
    field("progress").max = Math.max(run.progress.total, 1);
    field("progress").value = completed ? Math.max(run.progress.total, 1) : run.progress.done;
    field("progress-text").textContent = completed
      ? "every step done"
      : ended
        ? `stopped after ${run.progress.done} of ${run.progress.total} steps (${run.outcome.replace("_", " ")})`
        : `${run.progress.done}/${run.progress.total} steps`;
    field("reason").textContent = run.reason;
    appendLog(run.log_tail);
    next = run.log_tail.next;
  }

  async function poll() {
    let run;
    try {
      const response = await fetch(`${card.dataset.api}?after=${next}`, {
        headers: { Accept: "application/json" },
      });
      if (!response.ok) throw new Error(response.status);
      run = await response.json();
    } catch (error) {
      setTimeout(poll, 5000);
      return;
    }
    show(run);
    if (run.state === "finished" || run.state === "canceled") {
      window.location.reload();
      return;
    }
    setTimeout(poll, 1500);
  }
  setTimeout(poll, 1000);
})();
