// A read-only field holding a link to copy (an invitation, resume or open study link, an API token) selects
// its whole text when clicked. A file of its own, loaded by the site's pages and the admin's, because the
// Content-Security-Policy runs no inline handler (onclick="...").
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var field = event.target;
    if (field instanceof HTMLElement && field.hasAttribute("data-select-on-click") && typeof field.select === "function") {
      field.select();
    }
  });
})();
