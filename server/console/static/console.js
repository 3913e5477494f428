// Live updates for the console's pages (progressive enhancement: without
// JavaScript every page works as it is, and a reload shows the news).
//
// Every element with data-live and an id is refreshed in place from a
// fresh GET of the page itself, every few seconds while the tab is visible.
// The request is an ordinary page load, with the session cookie, so the
// console's roles apply to each one: a session that ended or lost the
// read role gets a redirect or a 403 and the page stops updating, saying
// why. A region the person is typing in (a focused or edited field) is left
// alone until they are done.
(function () {
  'use strict';
  var every = 2000;
  var regions = document.querySelectorAll('[data-live][id]');
  var banner = document.getElementById('live');
  var stopped = {};
  if (!regions.length || !window.fetch || !window.DOMParser) {
    return;
  }

  // The command keys rendered into forms are fresh on every render; they
  // alone do not make a region new.
  function signature(el) {
    return el.innerHTML.replace(/name="key" value="[^"]*"/g, '');
  }

  function busy(el) {
    var a = document.activeElement;
    if (a && a !== document.body && el.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) {
      return true;
    }
    var fields = el.querySelectorAll('input[type=text], textarea');
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) {
        return true;
      }
    }
    return false;
  }

  // Which <details> a person opened or closed survive the swap.
  function swap(el, fresh) {
    var open = Array.prototype.map.call(el.querySelectorAll('details'), function (d) { return d.open; });
    el.innerHTML = fresh.innerHTML;
    var now = el.querySelectorAll('details');
    if (now.length === open.length) {
      for (var i = 0; i < now.length; i++) {
        now[i].open = open[i];
      }
    }
  }

  function stop(message) {
    if (banner) {
      banner.textContent = message;
      banner.hidden = false;
    }
    document.documentElement.dataset.live = 'stopped';
  }

  function schedule() {
    setTimeout(tick, every);
  }

  function tick() {
    if (document.hidden) {
      schedule();
      return;
    }
    fetch(window.location.href, { credentials: 'same-origin', redirect: 'manual', cache: 'no-store' })
      .then(function (res) {
        if (res.type === 'opaqueredirect' || res.status === 401 || res.status === 403) {
          stop('Live updates stopped: your session ended or no longer has the read role. Reload to log in again.');
          return stopped;
        }
        if (!res.ok) {
          return null; // a passing failure (a restart): try again later
        }
        return res.text();
      })
      .then(function (html) {
        if (html === stopped) {
          return;
        }
        if (html !== null) {
          var doc = new DOMParser().parseFromString(html, 'text/html');
          regions.forEach(function (el) {
            var fresh = doc.getElementById(el.id);
            if (fresh && !busy(el) && signature(fresh) !== signature(el)) {
              swap(el, fresh);
            }
          });
          document.documentElement.dataset.liveAt = String(Date.now());
        }
        schedule();
      }, function () {
        schedule(); // the server is unreachable for now
      });
  }

  document.documentElement.dataset.live = 'on';
  schedule();
})();
