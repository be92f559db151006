// Package browsertest drives the inspector page (server's GET /inspect) in a headless Chromium with
// chromedp, against a real Loom server over a seeded SQLite session. It is a module of its own so that
// chromedp stays out of the library's go.mod.
//
// The test finds Chromium as scripts/ensure-chromium.sh installs it (LOOM_CHROMIUM, else chromium,
// chromium-browser, google-chrome on PATH), and skips, saying so, only when there is none. It saves a
// screenshot to $LOOM_INSPECTOR_SCREENSHOT, or inspector.png in the test's temporary directory (the path
// is logged); with -update-screenshot it writes docs/inspector.png, the README's.
package browsertest
