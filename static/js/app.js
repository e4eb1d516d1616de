// Progressive enhancement for the annotator pages: live generation progress,
// keyboard shortcuts for choices, and no double submission of a form.
(function () {
  "use strict";

  // Disable a form's buttons once it is submitted; the server is idempotent anyway.
  document.querySelectorAll("form").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (form.dataset.submitted) { event.preventDefault(); return; }
      form.dataset.submitted = "1";
      setTimeout(function () {
        form.querySelectorAll("button").forEach(function (b) {
          b.disabled = true; b.setAttribute("aria-busy", "true");
          // A button's busy label ("Sending…") replaces its text while the server answers.
          if (b.dataset.busyLabel && (!event.submitter || event.submitter === b)) { b.textContent = b.dataset.busyLabel; }
        });
      }, 0);
    });
  });

  // The comparison page takes no answer until it has been on screen long enough to be read, so a key
  // held down or pressed twice cannot answer the next match too (the server refuses an answer naming
  // another match anyway). Key repeats never answer.
  var MIN_DISPLAY_MS = 600;
  var choiceForm = document.getElementById("choice-form");
  if (choiceForm) {
    var choiceButtons = choiceForm.querySelectorAll("button.choice");
    var ready = false;
    var makeReady = function () {
      ready = true;
      choiceForm.dataset.ready = "1";
      if (!choiceForm.dataset.submitted) {
        choiceButtons.forEach(function (b) { b.disabled = false; b.removeAttribute("aria-disabled"); });
      }
    };
    choiceButtons.forEach(function (b) { b.disabled = true; b.setAttribute("aria-disabled", "true"); });
    setTimeout(makeReady, MIN_DISPLAY_MS);
    // Back/forward cache: a page restored from it was read already; let it be answered again.
    window.addEventListener("pageshow", function (event) {
      if (event.persisted) {
        delete choiceForm.dataset.submitted;
        choiceButtons.forEach(function (b) { b.removeAttribute("aria-busy"); });
        makeReady();
      }
    });
    document.addEventListener("keydown", function (event) {
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      var target = event.target;
      if (target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) return;
      choiceForm.querySelectorAll("button[data-key]").forEach(function (button) {
        var keys = button.dataset.key.split(",");
        if (keys.indexOf(event.key) !== -1 || keys.indexOf(event.key.toLowerCase()) !== -1) {
          event.preventDefault();
          if (event.repeat || !ready) { return; }
          if (!choiceForm.dataset.submitted) { button.click(); }
        }
      });
    });
  }

  // Live progress on the waiting page.
  var wait = document.getElementById("wait");
  if (wait) {
    var url = wait.dataset.statusUrl;
    var list = document.getElementById("generation-list");
    var failure = document.getElementById("failure");
    var overdue = document.getElementById("overdue");
    var message = document.getElementById("wait-message");
    // The page's own words, in the study's language (data- attributes of #wait, translated by the server).
    var fill = function (template, values) {
      return template.replace(/\{(\w+)\}/g, function (whole, name) { return name in values ? values[name] : whole; });
    };
    var delay = 800;
    // A 503 (the database out of reach for a moment: kernel/unavailable.py) or no answer at all: asked again
    // after the server's Retry-After, doubled on each failure in a row up to 30 s. Reading is idempotent.
    var failures = 0;
    var poll = function () {
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) {
          if (!r.ok) {
            var error = new Error("status " + r.status);
            error.retryAfter = parseInt(r.headers.get("Retry-After"), 10);
            throw error;
          }
          return r.json();
        })
        .then(function (data) {
          failures = 0;
          if (data.status === "ready" || data.status === "ranked" || data.status === "discarded") {
            window.location.assign(data.next);
            return;
          }
          if (data.candidates.length) {
            list.innerHTML = "";
            data.candidates.forEach(function (c) {
              var li = document.createElement("li");
              li.dataset.status = c.status;
              li.innerHTML = '<span class="dot" aria-hidden="true"></span> ';
              li.appendChild(document.createTextNode(fill(wait.dataset.summaryLabel, { number: c.number }) + " "));
              var state = document.createElement("span");
              state.className = "state"; state.textContent = c.label;
              li.appendChild(state);
              list.appendChild(li);
            });
            var done = data.candidates.filter(function (c) { return c.status === "done"; }).length;
            message.textContent = fill(wait.dataset.readyMessage, { done: done, total: data.candidates.length });
          }
          if (data.overdue || data.failed || !data.candidates.length) { message.textContent = data.message; }
          failure.hidden = !data.failed;
          overdue.hidden = !data.overdue;
          delay = Math.min(delay * 1.25, 3000);
          setTimeout(poll, delay);
        })
        .catch(function (error) {
          var base = (error && error.retryAfter > 0 ? error.retryAfter : 3) * 1000;
          setTimeout(poll, Math.min(base * Math.pow(2, failures), 30000));
          failures += 1;
        });
    };
    setTimeout(poll, 300);
  }
})();

// Research pages: progress bars of background jobs update until the job ends, then the page reloads to show
// its files, unless the researcher has started filling in a form: then a notice offers the reload instead, so
// nothing typed is lost. Only running jobs carry data-poll, so a page with none polls nothing.
(function () {
  "use strict";
  var bars = document.querySelectorAll("progress[data-poll]");
  if (!bars.length) { return; }
  var edited = false;
  document.addEventListener("input", function () { edited = true; });
  document.addEventListener("change", function () { edited = true; });
  var finished = function (bar) {
    if (!edited) { window.location.reload(); return; }
    var cell = bar.parentNode;
    if (cell.querySelector(".job-finished")) { return; }
    var note = document.createElement("span");
    note.className = "job-finished";
    note.setAttribute("role", "status");
    note.appendChild(document.createTextNode(" Finished. "));
    var link = document.createElement("a");
    link.href = window.location.pathname;
    link.textContent = "Reload the page to see the results";
    note.appendChild(link);
    cell.appendChild(note);
  };
  bars.forEach(function (bar) {
    var poll = function () {
      fetch(bar.dataset.poll, { credentials: "same-origin" })
        .then(function (r) { if (!r.ok) { throw new Error("status " + r.status); } return r.json(); })
        .then(function (data) {
          bar.value = data.progress;
          var state = bar.parentNode.querySelector(".state");
          if (state) { state.textContent = data.status + (data.stage ? ": " + data.stage : ""); }
          if (data.status !== "queued" && data.status !== "running") { finished(bar); return; }
          setTimeout(poll, 1500);
        })
        .catch(function () { setTimeout(poll, 5000); });
    };
    setTimeout(poll, 800);
  });
})();

// Forms with errors: mark the fields invalid, tie each message to its field, focus the first one.
(function () {
  "use strict";
  var first = null;
  document.querySelectorAll(".field.has-error").forEach(function (field) {
    var message = field.querySelector(".error");
    field.querySelectorAll("input, textarea, select").forEach(function (input) {
      input.setAttribute("aria-invalid", "true");
      if (message) {
        var ids = (input.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
        ids.push(message.id);
        input.setAttribute("aria-describedby", ids.join(" "));
      }
      if (!first) { first = input; }
    });
  });
  if (first) { first.focus(); }

  // A citation link opens the cited abstract instead of jumping to a closed summary line.
  document.querySelectorAll("a.cite").forEach(function (link) {
    link.addEventListener("click", function () {
      var target = document.querySelector(link.getAttribute("href"));
      var details = target && target.querySelector("details");
      if (details) { details.open = true; }
    });
  });
})();

// The question's length as the annotator types (the server refuses an over-long one with a form error; the
// box has no maxlength, which would cut a pasted question without a word). The visible count follows every
// key; screen readers hear it through a polite live region once typing pauses, or at once past the limit.
(function () {
  "use strict";
  var counter = document.getElementById("id_text-count");
  var live = document.getElementById("id_text-count-live");
  var box = counter && document.getElementById(counter.getAttribute("data-for"));
  if (!box) { return; }
  var limit = parseInt(box.getAttribute("data-max-chars"), 10);
  var timer = null;
  var wasOver = false;
  var fill = function (template, values) {
    return template.replace(/\{(\w+)\}/g, function (whole, name) { return name in values ? values[name] : whole; });
  };
  var update = function () {
    // Line breaks count once, as the server counts them.
    var count = box.value.replace(/\r\n/g, "\n").length;
    var over = count > limit;
    var text = over
      ? fill(counter.getAttribute("data-over"), { over: count - limit, limit: limit })
      : fill(counter.getAttribute("data-counting"), { count: count, limit: limit });
    counter.textContent = text;
    counter.classList.toggle("error", over);
    box.setAttribute("aria-invalid", over ? "true" : "false");
    clearTimeout(timer);
    if (over !== wasOver) {
      live.textContent = text;
    } else {
      timer = setTimeout(function () { live.textContent = text; }, 1500);
    }
    wasOver = over;
  };
  box.addEventListener("input", update);
  update();
  clearTimeout(timer);  // the count on arrival is on screen; nothing to announce until the annotator types
})();

// The resume link: selected whole on a tap, and a button that copies it (shown where the browser can copy).
(function () {
  "use strict";
  var link = document.getElementById("resume-link");
  if (!link) { return; }
  link.addEventListener("focus", function () { link.select(); });
  link.addEventListener("click", function () { link.select(); });
  var button = document.getElementById("resume-copy");
  var status = document.getElementById("resume-copy-status");
  if (!button || !navigator.clipboard || !window.isSecureContext) { return; }
  button.hidden = false;
  button.addEventListener("click", function () {
    navigator.clipboard.writeText(link.value).then(
      function () { status.textContent = button.getAttribute("data-copied"); },
      function () { link.select(); status.textContent = button.getAttribute("data-failed"); }
    );
  });
})();
