#!/usr/bin/env bash
# Headless Chromium + ChromeDriver for the web page's browser test (Debian packages). Idempotent; where
# they cannot be installed (no apt-get, not root and no sudo) it says so and the browser test skips.
set -uo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "setup: no apt-get here; install Chromium and ChromeDriver yourself to run the browser test" >&2
  exit 0
fi
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then as_root=(sudo -n); else
    echo "setup: not root; the browser test will skip (apt-get install chromium chromium-driver)" >&2
    exit 0
  fi
fi
echo "setup: installing chromium and chromium-driver (Debian packages) for the browser test" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq >/dev/null 2>&1 || true
"${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null \
  || echo "setup: chromium could not be installed; the browser test will skip" >&2
exit 0
