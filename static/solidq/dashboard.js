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
