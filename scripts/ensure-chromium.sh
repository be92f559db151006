#!/usr/bin/env bash
# ensure-chromium.sh makes sure a headless Chromium is installed, for the inspector page's browser test
# (internal/browsertest), which drives it with chromedp. It takes LOOM_CHROMIUM if set, else chromium,
# chromium-browser, google-chrome or google-chrome-stable on PATH. Without one, on a Debian-like system, it
# runs apt-get update and installs Debian's chromium package, as root or through sudo without a password
# prompt. Where it cannot, it says so and exits 0: the browser test then skips, saying why.
set -euo pipefail

say() { echo "ensure-chromium: $*" >&2; }

find_browser() {
	if [[ -n "${LOOM_CHROMIUM:-}" ]]; then
		[[ -x "${LOOM_CHROMIUM}" ]] && echo "${LOOM_CHROMIUM}" && return 0
		return 1
	fi
	command -v chromium || command -v chromium-browser || command -v google-chrome || command -v google-chrome-stable
}

# give_up explains why no browser was installed; the browser test skips (it never fails for want of one).
give_up() {
	say "$*"
	say "the inspector's browser test (internal/browsertest) will skip; install Debian's chromium, or set LOOM_CHROMIUM to a Chromium binary"
	exit 0
}

if bin=$(find_browser); then
	echo "ensure-chromium: using ${bin} ($("${bin}" --version 2>/dev/null | head -n1 || echo 'version unknown'))"
	exit 0
fi

say "no chromium found"
command -v apt-get >/dev/null || give_up "there is no apt-get to install one with"

if [[ $(id -u) -eq 0 ]]; then
	as_root() { env DEBIAN_FRONTEND=noninteractive "$@"; }
else
	command -v sudo >/dev/null || give_up "installing chromium needs root, and there is no sudo"
	if ! sudo -n true 2>/dev/null; then
		[[ -t 0 ]] || give_up "installing chromium needs root, and sudo wants a password but there is no terminal to type it in (run 'make test-deps' in one)"
		say "installing chromium needs root: sudo asks for your password"
		sudo -v || give_up "sudo refused"
	fi
	as_root() { sudo -n env DEBIAN_FRONTEND=noninteractive "$@"; }
fi

# Wait up to 5 minutes for the package lock: on a fresh machine, unattended upgrades often hold it.
apt=(apt-get -o DPkg::Lock::Timeout=300)
say "apt-get update"
as_root "${apt[@]}" update -qq || give_up "apt-get update failed"
say "installing Debian's chromium"
as_root "${apt[@]}" install -y -qq --no-install-recommends chromium >/dev/null || give_up "apt-get install chromium failed"
bin=$(find_browser) || give_up "chromium is installed, but it is not on PATH"
echo "ensure-chromium: installed ${bin} ($("${bin}" --version 2>/dev/null | head -n1 || echo 'version unknown'))"
