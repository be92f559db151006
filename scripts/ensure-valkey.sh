#!/usr/bin/env bash
# ensure-valkey.sh makes sure a Valkey-protocol server binary is installed, for the store/valkey tests
# (which start their own servers on free loopback ports; see internal/valkeytest). It prefers an installed
# valkey-server, then redis-server, and otherwise installs Debian's redis-server (which speaks the same
# protocol) with apt-get, as root or through sudo. It prints the binary it found.
set -euo pipefail

find_server() {
	if [[ -n "${LOOM_VALKEY_SERVER:-}" && -x "${LOOM_VALKEY_SERVER}" ]]; then
		echo "${LOOM_VALKEY_SERVER}"
		return 0
	fi
	command -v valkey-server || command -v redis-server
}

if bin=$(find_server); then
	echo "ensure-valkey: using ${bin} ($("${bin}" --version | head -n1))"
	exit 0
fi

echo "ensure-valkey: no valkey-server or redis-server found; installing Debian's redis-server" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
	if ! command -v sudo >/dev/null; then
		echo "ensure-valkey: need root or sudo to install redis-server (or set LOOM_VALKEY_SERVER)" >&2
		exit 1
	fi
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# --no-install-recommends keeps it to the server; the package's own service is not needed by the tests.
$sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
bin=$(find_server)
echo "ensure-valkey: installed ${bin} ($("${bin}" --version | head -n1))"
