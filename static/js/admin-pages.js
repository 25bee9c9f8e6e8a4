// The tokens page's copy button: copies the new secret, says so, and selects the text when
// the clipboard is not available (plain HTTP, an old browser) so Ctrl+C still works.
document.querySelectorAll("[data-copy]").forEach((button) => {
  button.addEventListener("click", async () => {
    const field = document.querySelector(button.dataset.copy);
    const status = document.querySelector("[data-copy-status]");
    try {
      await navigator.clipboard.writeText(field.value);
      if (status) status.textContent = "Copied to the clipboard.";
    } catch (problem) {
      field.select();
      if (status) status.textContent = "Selected: press Ctrl+C (or Cmd+C) to copy.";
    }
  });
});
