#!/usr/bin/env bash
# ensure-valkey.sh makes sure a Valkey-protocol server binary (Valkey, or Redis 7 or later) is installed, for
# the store/valkey tests, which start their own servers on free loopback ports (see internal/valkeytest). It
# takes LOOM_VALKEY_SERVER if set, else valkey-server or redis-server on PATH. Without one, on a Debian-like
# system, it runs apt-get update and installs Debian's valkey-server (or redis-server where there is no
# valkey-server package), as root or through sudo without a password prompt; otherwise it says what to
# install and fails. It prints the binary it found.
#
# Installing the package also starts its system service (on port 6379); the tests do not use it.
set -euo pipefail

# The tests need Redis 7.0 (CLUSTER ADDSLOTSRANGE); every Valkey release is 7.2 or later.
readonly min_major=7

say() { echo "ensure-valkey: $*" >&2; }

fail() {
	say "$*"
	say "install valkey-server (or redis-server ${min_major} or later) and put it on PATH, or set LOOM_VALKEY_SERVER to its path"
	exit 1
}

find_server() {
	if [[ -n "${LOOM_VALKEY_SERVER:-}" ]]; then
		echo "${LOOM_VALKEY_SERVER}"
		return 0
	fi
	command -v valkey-server || command -v redis-server
}

if [[ -n "${LOOM_VALKEY_SERVER:-}" && ! -x "${LOOM_VALKEY_SERVER}" ]]; then
	fail "LOOM_VALKEY_SERVER=${LOOM_VALKEY_SERVER} is not an executable file"
fi

# check_version fails unless the server at $1 is recent enough, and prints what it found.
check_version() {
	local version major
	version=$("$1" --version | head -n1) || fail "$1 --version failed"
	# "Redis server v=7.0.15 sha=..." or "Valkey server v=8.0.2 sha=..."
	major=${version#*v=}
	major=${major%%.*}
	if ! [[ "${major}" =~ ^[0-9]+$ ]]; then
		fail "cannot tell the version of $1 from: ${version}"
	fi
	if ((major < min_major)); then
		fail "$1 is too old for the tests (${version}; they need ${min_major}.0 or later)"
	fi
	echo "ensure-valkey: $2 $1 (${version})"
}

if bin=$(find_server); then
	check_version "${bin}" using
	exit 0
fi

say "no valkey-server or redis-server found"
command -v apt-get >/dev/null || fail "there is no apt-get to install one with"

# as_root runs a command as root: directly when we are root, else with sudo -n, which fails rather than
# waits for a password. sudo asks for the password once, up front, only when someone can type it (stdin is
# a terminal). env passes DEBIAN_FRONTEND through sudo's env_reset.
if [[ $(id -u) -eq 0 ]]; then
	as_root() { env DEBIAN_FRONTEND=noninteractive "$@"; }
else
	command -v sudo >/dev/null || fail "installing a server needs root, and there is no sudo"
	if ! sudo -n true 2>/dev/null; then
		[[ -t 0 ]] || fail "installing a server needs root, and sudo wants a password but there is no terminal to type it in (run 'make test-deps' in one)"
		say "installing a server needs root: sudo asks for your password"
		sudo -v || fail "sudo refused"
	fi
	as_root() { sudo -n env DEBIAN_FRONTEND=noninteractive "$@"; }
fi

# Wait up to 5 minutes for the package lock: on a fresh machine, unattended upgrades often hold it.
apt=(apt-get -o DPkg::Lock::Timeout=300)
say "apt-get update"
as_root "${apt[@]}" update -qq || fail "apt-get update failed"
pkg=redis-server
if apt-cache policy valkey-server 2>/dev/null | grep -q 'Candidate: [0-9]'; then
	pkg=valkey-server
fi
say "installing Debian's ${pkg}"
# --no-install-recommends keeps it to the server.
as_root "${apt[@]}" install -y -qq --no-install-recommends "${pkg}" >/dev/null || fail "apt-get install ${pkg} failed"
bin=$(find_server) || fail "${pkg} is installed, but neither valkey-server nor redis-server is on PATH"
check_version "${bin}" installed
