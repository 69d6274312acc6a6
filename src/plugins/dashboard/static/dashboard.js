// The dashboard's own script: what htmx does not do. Loaded with `defer`; no inline script anywhere (CSP).
"use strict";

document.addEventListener("click", function copyField(event) {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  field.select();
  const done = () => {
    button.textContent = "Copied";
    setTimeout(() => (button.textContent = "Copy"), 2000);
  };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(field.value).then(done, () => document.execCommand("copy") && done());
  else if (document.execCommand("copy")) done();
});

// A form with data-confirm asks first (delete buttons); without JavaScript it submits to a confirmation page.
document.addEventListener("submit", function confirmSubmit(event) {
  const form = event.target;
  const question = form.dataset && form.dataset.confirm;
  if (!question) return;
  if (window.confirm(question)) {
    const confirmed = document.createElement("input");
    confirmed.type = "hidden";
    confirmed.name = "confirmed";
    confirmed.value = "yes";
    form.appendChild(confirmed);
  } else {
    event.preventDefault();
  }
});
