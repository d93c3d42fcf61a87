// The icelog console's only script: small enhancements; every page works without it.
(function () {
  "use strict";

  // Destructive forms ask first.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // The storage form shows the fields of the chosen storage type only.
  function storage(form) {
    var chosen = form.querySelector("input[name=storage-type]:checked")
      || form.querySelector("input[name=storage-type]");
    var kind = chosen ? chosen.value : "";
    form.querySelectorAll("[data-for]").forEach(function (part) {
      var on = part.getAttribute("data-for") === kind;
      part.hidden = !on;
      // Kinds may share an input's name: only the chosen kind's inputs are sent.
      part.querySelectorAll("input, select, textarea").forEach(function (input) {
        input.disabled = !on;
      });
    });
  }
  document.querySelectorAll("[data-storage-form]").forEach(function (form) {
    storage(form);
    form.addEventListener("change", function () { storage(form); });
  });

  // Times in the page are UTC; show the reader's local time on hover.
  document.querySelectorAll("[data-ms]").forEach(function (el) {
    var ms = Number(el.getAttribute("data-ms"));
    if (ms) el.title = new Date(ms).toString();
  });
})();
