// Every page: a form or button with data-confirm asks before it submits (cancel, waive, stop).
(function () {
  "use strict";
  document.addEventListener("submit", (event) => {
    const button = event.submitter;
    const question = (button && button.dataset.confirm) || event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });
})();
