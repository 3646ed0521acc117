// The dashboard's one script of its own: a form with data-confirm asks before it is sent
// ("Discard job 12? This deletes it."). A file, not an onsubmit attribute, since the
// dashboard's Content-Security-Policy runs no inline script (flask_solidq/dashboard/headers.py).
document.addEventListener(
  "submit",
  function (event) {
    var question = event.target.getAttribute("data-confirm");
    if (question !== null && !window.confirm(question)) {
      event.preventDefault();
    }
  },
  true
);
