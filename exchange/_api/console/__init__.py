"""The operator console: server-rendered pages at ``/`` over the same runtime API as the HTTP API,
with one small script (``static/console.js``) for live updates. Everything it needs ships in this
package: no CDN, no build step, no internet."""
