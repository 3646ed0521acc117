// The dashboard's one script of its own. Files, not inline attributes, since the dashboard's
// Content-Security-Policy runs no inline script (flask_solidq/dashboard/headers.py).

// A form, or the button that sends it, with data-confirm asks before it is sent
// ("Discard job 12? This deletes it.").
document.addEventListener(
  "submit",
  function (event) {
    var button = event.submitter;
    var source = button && button.hasAttribute("data-confirm") ? button : event.target;
    var question = source.getAttribute("data-confirm");
    if (question !== null && !window.confirm(question)) {
      event.preventDefault();
    }
  },
  true
);

// The jobs list's selected rows (templates/solidq/jobs.html): each row's box belongs to the
// form#solidq-selected above the table (its form attribute); "select all" checks the page's.
// The form's buttons are off while nothing is selected, and the list's refresh (htmx, every
// 3 s) waits while something is: it would redraw the rows and drop the selection.
(function () {
  var FORM = "solidq-selected";

  function rowBoxes() {
    return Array.prototype.slice.call(
      document.querySelectorAll('input[type="checkbox"][form="' + FORM + '"]')
    );
  }

  function checkedCount() {
    return rowBoxes().filter(function (box) { return box.checked; }).length;
  }

  function update() {
    var form = document.getElementById(FORM);
    if (form === null) {
      return;
    }
    var boxes = rowBoxes();
    var checked = checkedCount();
    form.querySelectorAll("button").forEach(function (button) {
      button.disabled = checked === 0;
    });
    var count = form.querySelector("[data-selected-count]");
    if (count !== null) {
      count.textContent = checked ? checked + " selected" : "";
    }
    var all = document.querySelector("[data-select-all]");
    if (all !== null) {
      all.checked = boxes.length > 0 && checked === boxes.length;
      all.indeterminate = checked > 0 && checked < boxes.length;
    }
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.hasAttribute && target.hasAttribute("data-select-all")) {
      rowBoxes().forEach(function (box) { box.checked = target.checked; });
    }
    update();
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "jobs" && checkedCount() > 0) {
      event.preventDefault();
    }
  });
  document.addEventListener("htmx:afterSettle", update);
  document.addEventListener("DOMContentLoaded", update);
})();

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

// htmx requests and swaps stay inside the dashboard (flask_solidq/dashboard/live.py): a request
// is sent only to this origin (selfRequestsOnly, in base.html's htmx-config) under the
// dashboard's root (the body's data-solidq-root: the path after the browser resolved any
// "..", so a crafted path can't lead out), and a response is swapped in only when the
// dashboard's blueprint answered it (its X-SolidQ-Dashboard header,
// flask_solidq/dashboard/headers.py). Another page's markup could carry an hx-post, which the
// body's CSRF header would make a real action.
function dashboardRoot() {
  return document.body === null ? null : document.body.getAttribute("data-solidq-root");
}

document.addEventListener("htmx:validateUrl", function (event) {
  var root = dashboardRoot();
  var url = event.detail.url;
  var inside = root !== null && typeof url === "object" && url.pathname.indexOf(root) === 0;
  if (!event.detail.sameHost || !inside) {
    event.preventDefault();
  }
});

document.addEventListener("htmx:beforeSwap", function (event) {
  var xhr = event.detail.xhr;
  if (xhr.getResponseHeader("X-SolidQ-Dashboard") !== "1") {
    event.detail.shouldSwap = false;
  }
});

// The Menu button of a phone's header: the header "folds" (dashboard.css then hides the nav
// behind the button on a phone's width), and the button opens and closes the nav.
document.addEventListener("DOMContentLoaded", function () {
  var button = document.getElementById("nav-toggle");
  if (button === null) {
    return;
  }
  button.closest("header").classList.add("folds");
  button.addEventListener("click", function () {
    var open = button.closest("header").classList.toggle("nav-open");
    button.setAttribute("aria-expanded", open ? "true" : "false");
  });
});

// On a phone every table's rows stack into cards (dashboard.css), where a cell no longer sits
// under its header: each cell gets its column's name (data-label) for the stylesheet to
// show before it, on load and after each refresh redrew a table.
function labelCells() {
  document.querySelectorAll("main table").forEach(function (table) {
    var names = Array.prototype.map.call(table.querySelectorAll("thead th"), function (header) {
      return header.textContent.trim();
    });
    table.querySelectorAll("tbody tr").forEach(function (row) {
      Array.prototype.forEach.call(row.children, function (cell, index) {
        if (names[index]) {
          cell.setAttribute("data-label", names[index]);
        }
      });
    });
    table.classList.add("stacks");
  });
}

document.addEventListener("DOMContentLoaded", labelCells);
document.addEventListener("htmx:afterSettle", labelCells);
