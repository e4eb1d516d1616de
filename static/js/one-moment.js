// The "one moment" page (templates/one_moment.html, status 503: the database was out of reach for a moment).
// It tries again by itself: a page that was loaded (GET) is loaded again; an idempotent answer (a choice
// naming its match, a question carrying its client token) is sent again. The wait grows with each attempt at
// the same address (the server's Retry-After, then doubled, at most 30 s), so a long outage is not hammered.
(function () {
  "use strict";
  var box = document.getElementById("one-moment");
  if (!box) { return; }
  var resend = document.getElementById("one-moment-resend");
  if (!box.dataset.reload && !resend) { return; }  // a write that is not sent again: the annotator decides
  var base = parseInt(box.dataset.retryAfter, 10) || 2;
  var key = "one-moment:" + window.location.pathname;
  var attempts = 0;
  try {
    var last = JSON.parse(window.sessionStorage.getItem(key) || "null");
    // Attempts of an earlier outage (over a minute ago) do not lengthen this one's waits.
    if (last && Date.now() - last.at < 60000) { attempts = last.attempts; }
    window.sessionStorage.setItem(key, JSON.stringify({ attempts: attempts + 1, at: Date.now() }));
  } catch (e) { /* storage refused: every wait is the base one */ }
  var seconds = Math.min(base * Math.pow(2, attempts), 30);
  window.setTimeout(function () {
    if (resend) { resend.submit(); } else { window.location.reload(); }
  }, seconds * 1000);
})();
