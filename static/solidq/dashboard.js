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

// Live or paused (flask_solidq/dashboard/live.py): every region marked data-live refreshes by
// an htmx poll; while paused each poll's request is cancelled before it is sent, so the page
// stays as it is. The header's button says which, and switches; the choice is kept in
// localStorage, so every page of the dashboard opens as the last one was left. The button
// counts the polls held back (data-held: paused, or busy below), which is how a test knows a
// refresh was due.
var LIVE_KEY = "solidq-dashboard-live";

function isPaused() {
  try {
    return window.localStorage.getItem(LIVE_KEY) === "paused";
  } catch (error) {
    return false; // storage refused (a private window's policy): always live
  }
}

function showLive(button) {
  var paused = isPaused();
  button.textContent = paused ? "Paused" : "Live";
  button.setAttribute("aria-pressed", paused ? "false" : "true");
  button.classList.toggle("paused", paused);
}

document.addEventListener("DOMContentLoaded", function () {
  var button = document.getElementById("live-toggle");
  if (button === null) {
    return;
  }
  showLive(button);
  button.addEventListener("click", function () {
    try {
      window.localStorage.setItem(LIVE_KEY, isPaused() ? "live" : "paused");
    } catch (error) {
      return;
    }
    showLive(button);
  });
  // Another tab of the dashboard switched: follow it.
  window.addEventListener("storage", function (event) {
    if (event.key === LIVE_KEY) {
      showLive(button);
    }
  });
});

// A region where someone is choosing something (a field of it has the focus, or a box of
// it is ticked) isn't refreshed either until they are done: a refresh would undo the choice.
var TYPED = "input:not([type=checkbox]):not([type=radio]), select, textarea";

function isBusy(region) {
  var field = document.activeElement;
  var typing = field !== null && field.matches(TYPED) && region.contains(field);
  return typing || region.querySelector("input[type=checkbox]:checked") !== null;
}

document.addEventListener("htmx:beforeRequest", function (event) {
  var region = event.detail.elt;
  if (!region.hasAttribute("data-live")) {
    return;
  }
  if (isBusy(region) || isPaused()) {
    event.preventDefault();
    var button = document.getElementById("live-toggle");
    if (button !== null) {
      button.setAttribute("data-held", String(Number(button.getAttribute("data-held") || 0) + 1));
    }
  }
});
