// The console's passkeys (WebAuthn) in the browser: the only script of the
// console, loaded (defer) by the pages that offer passkeys. Each offer is an
// element with `data-passkey` ("register", "sign-in" or "mfa") that names
// the console's two calls (data-options, data-finish), carries the form
// token (data-csrf) and the texts to show, in the page's language
// (data-msg-*). Without WebAuthn in the browser nothing of it shows: the
// pages work as before (the mailed link, the code).
//
// The API speaks WebAuthn's JSON (base64url without padding for every byte
// string); the browser's calls take and give ArrayBuffers: the conversion
// is done here by hand, not with parseCreationOptionsFromJSON (not in every
// browser yet).
(function () {
  "use strict";

  // --- base64url <-> bytes ------------------------------------------------

  function toBytes(text) {
    var b64 = String(text).replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4 !== 0) {
      b64 += "=";
    }
    var raw = atob(b64);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) {
      bytes[i] = raw.charCodeAt(i);
    }
    return bytes.buffer;
  }

  function toText(buffer) {
    var bytes = new Uint8Array(buffer);
    var raw = "";
    for (var i = 0; i < bytes.length; i++) {
      raw += String.fromCharCode(bytes[i]);
    }
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  // A copy of `value` without its null members (the browser's dictionaries
  // refuse null where they expect a list or a known word).
  function withoutNulls(value) {
    if (Array.isArray(value)) {
      return value.map(withoutNulls);
    }
    if (value !== null && typeof value === "object") {
      var out = {};
      Object.keys(value).forEach(function (k) {
        if (value[k] !== null && value[k] !== undefined) {
          out[k] = withoutNulls(value[k]);
        }
      });
      return out;
    }
    return value;
  }

  function credentialList(list) {
    return (list || []).map(function (d) {
      var copy = Object.assign({}, d);
      copy.id = toBytes(d.id);
      return copy;
    });
  }

  // The API's `publicKey` of a registration, for navigator.credentials.create.
  function creationOptions(json) {
    var o = withoutNulls(json);
    o.challenge = toBytes(o.challenge);
    o.user = Object.assign({}, o.user, { id: toBytes(o.user.id) });
    if (o.excludeCredentials) {
      o.excludeCredentials = credentialList(o.excludeCredentials);
    }
    return o;
  }

  // The API's `publicKey` of a sign-in, for navigator.credentials.get.
  function requestOptions(json) {
    var o = withoutNulls(json);
    o.challenge = toBytes(o.challenge);
    if (o.allowCredentials) {
      o.allowCredentials = credentialList(o.allowCredentials);
    }
    return o;
  }

  var TRANSPORTS = ["usb", "nfc", "ble", "internal", "hybrid"];

  // A new credential as the API reads it (PublicKeyCredential.toJSON()'s form).
  function registrationJSON(cred) {
    var r = cred.response;
    var transports = typeof r.getTransports === "function" ? r.getTransports() : [];
    return {
      id: cred.id,
      rawId: toText(cred.rawId),
      type: cred.type,
      response: {
        attestationObject: toText(r.attestationObject),
        clientDataJSON: toText(r.clientDataJSON),
        transports: transports.filter(function (t) {
          return TRANSPORTS.indexOf(t) >= 0;
        })
      },
      extensions: {}
    };
  }

  // An assertion (a sign-in) as the API reads it.
  function assertionJSON(cred) {
    var r = cred.response;
    return {
      id: cred.id,
      rawId: toText(cred.rawId),
      type: cred.type,
      response: {
        authenticatorData: toText(r.authenticatorData),
        clientDataJSON: toText(r.clientDataJSON),
        signature: toText(r.signature),
        userHandle: r.userHandle ? toText(r.userHandle) : null
      },
      extensions: {}
    };
  }

  // --- the console's calls ------------------------------------------------

  // A failure the console explained: its answer's body ({error, redirect,
  // reauthenticate}).
  function Refused(body) {
    this.body = body || {};
  }

  // The console did not answer (offline, or it is down).
  function Unreachable() {}

  function post(box, url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "content-type": "application/json",
        "x-csrf-token": box.getAttribute("data-csrf") || ""
      },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().catch(function () {
        return {};
      }).then(function (json) {
        if (!r.ok) {
          throw new Refused(json);
        }
        return json;
      });
    }, function () {
      throw new Unreachable();
    });
  }

  // --- one offer on the page ----------------------------------------------

  function supported() {
    return !!(window.PublicKeyCredential && navigator.credentials &&
      typeof navigator.credentials.create === "function" &&
      typeof navigator.credentials.get === "function");
  }

  function setUp(box) {
    var kind = box.getAttribute("data-passkey");
    var status = box.querySelector("[data-passkey-status]");
    var alertBox = box.querySelector("[data-passkey-alert]");
    var reauth = box.querySelector("[data-passkey-reauth]");
    var busy = false;
    // The sign-in page's background request (the email field's autofill).
    var quiet = null;

    function msg(name) {
      return box.getAttribute("data-msg-" + name) || "";
    }

    function say(text) {
      if (status) {
        status.textContent = text;
      }
    }

    function fail(text) {
      say("");
      if (alertBox) {
        alertBox.textContent = text;
      }
    }

    function clear() {
      say("");
      fail("");
      if (reauth) {
        reauth.hidden = true;
      }
    }

    // What went wrong, in words of the page (or of the console's answer).
    function explain(err) {
      if (err instanceof Refused) {
        if (err.body.redirect && !err.body.error) {
          window.location.assign(err.body.redirect);
          return;
        }
        fail(err.body.error || msg("failed"));
        if (err.body.reauthenticate && reauth) {
          reauth.hidden = false;
          var button = reauth.querySelector("button");
          if (button) {
            button.focus();
          }
        }
        return;
      }
      if (err instanceof Unreachable) {
        fail(msg("unavailable"));
        return;
      }
      // The browser's refusals: closed or timed out, or (registering) a
      // passkey of this account already on this device.
      var name = err && err.name;
      if (name === "NotAllowedError" || name === "AbortError") {
        fail(msg("cancelled"));
      } else if (name === "InvalidStateError" && msg("exists")) {
        fail(msg("exists"));
      } else {
        fail(msg("failed"));
      }
    }

    function done(answer) {
      window.location.assign((answer && answer.redirect) || window.location.href);
    }

    // Registration: the name typed, the options, the browser's ceremony,
    // the credential to the console; then the list shows it.
    function register(form) {
      var input = form.querySelector("input[name=name]");
      form.addEventListener("submit", function (ev) {
        ev.preventDefault();
        if (busy) {
          return;
        }
        clear();
        var name = input.value.trim();
        if (!name) {
          fail(msg("name"));
          input.focus();
          return;
        }
        busy = true;
        say(msg("working"));
        post(box, box.getAttribute("data-options"), {}).then(function (o) {
          return navigator.credentials.create({
            publicKey: creationOptions(o.options.publicKey)
          }).then(function (cred) {
            return post(box, box.getAttribute("data-finish"), {
              challenge_id: o.challenge_id,
              name: name,
              credential: registrationJSON(cred)
            });
          });
        }).then(done).catch(function (err) {
          busy = false;
          explain(err);
        });
      });
    }

    // A sign-in (the button, or the autofill's background request).
    function signIn(mediation) {
      var run = { controller: new AbortController(), picked: false };
      run.answer = post(box, box.getAttribute("data-options"), {}).then(function (o) {
        var request = { publicKey: requestOptions(o.options.publicKey), signal: run.controller.signal };
        if (mediation) {
          request.mediation = mediation;
        }
        return navigator.credentials.get(request).then(function (cred) {
          run.picked = true;
          return post(box, box.getAttribute("data-finish"), {
            challenge_id: o.challenge_id,
            credential: assertionJSON(cred)
          });
        });
      });
      return run;
    }

    function stopQuiet() {
      if (!quiet) {
        return Promise.resolve();
      }
      var q = quiet;
      quiet = null;
      q.controller.abort();
      // The browser takes one request at a time: wait until it has let go
      // of the background one (briefly: never wait on it for long).
      return Promise.race([
        q.answer.catch(function () {}),
        new Promise(function (resolve) {
          setTimeout(resolve, 1000);
        })
      ]);
    }

    function startQuiet() {
      var q = signIn("conditional");
      quiet = q;
      q.answer.then(done).catch(function (err) {
        if (quiet === q) {
          quiet = null;
        }
        // Aborted for the button, the browser's own refusal, or no options
        // (the button will say why): silent. Once a passkey was picked in
        // the autofill, what went wrong is worth saying.
        if (q.picked && !q.controller.signal.aborted) {
          explain(err);
        }
      });
    }

    function button(start) {
      start.addEventListener("click", function () {
        if (busy) {
          return;
        }
        busy = true;
        clear();
        say(msg("working"));
        stopQuiet().then(function () {
          return signIn(null).answer;
        }).then(done).catch(function (err) {
          busy = false;
          explain(err);
        });
      });
    }

    // Only where WebAuthn is: the offer shows, its "not here" note goes.
    if (!supported()) {
      return;
    }
    box.querySelectorAll("[data-passkey-unsupported]").forEach(function (el) {
      el.hidden = true;
    });
    if (kind === "register") {
      var form = box.querySelector("form[data-passkey-show]");
      if (form) {
        register(form);
      }
    } else {
      var start = box.querySelector("[data-passkey-start]");
      if (start) {
        button(start);
        start.hidden = false;
      }
    }
    box.querySelectorAll("[data-passkey-show]").forEach(function (el) {
      el.hidden = false;
    });
    if (kind === "sign-in" && typeof PublicKeyCredential.isConditionalMediationAvailable === "function") {
      PublicKeyCredential.isConditionalMediationAvailable().then(function (yes) {
        if (yes && !busy) {
          startQuiet();
        }
      }).catch(function () {});
    }
  }

  document.querySelectorAll("[data-passkey]").forEach(setUp);
})();
