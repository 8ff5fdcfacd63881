#!/usr/bin/env bash
# Checks the Debian package (what `test.sh` runs): it builds, it lists what
# it must, and it installs with dpkg into a scratch root (a chroot-like
# folder with its own dpkg database), where its `corral` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
deb=$(./scripts/package-deb.sh --debug | tail -1)
contents=$(dpkg-deb --contents "$deb" | awk '{print $6}')
missing=0
for path in ./usr/bin/corral ./usr/bin/corral-push ./usr/bin/corral-wake ./usr/bin/corral-tray ./usr/bin/corral-app ./usr/share/applications/corral.desktop \
  ./etc/xdg/autostart/corral.desktop ./usr/share/icons/hicolor/16x16/apps/corral.png \
  ./usr/share/icons/hicolor/32x32/apps/corral.png ./usr/share/icons/hicolor/48x48/apps/corral.png \
  ./usr/share/icons/hicolor/128x128/apps/corral.png ./usr/share/icons/hicolor/256x256/apps/corral.png \
  ./usr/share/icons/hicolor/512x512/apps/corral.png ./usr/share/man/man1/corral.1.gz \
  ./usr/share/bash-completion/completions/corral ./usr/share/zsh/vendor-completions/_corral \
  ./usr/share/fish/vendor_completions.d/corral.fish ./usr/share/corral/apparmor/bwrap \
  ./usr/share/doc/corral/README.md ./usr/share/doc/corral/docs/SUMMARY.md ./usr/share/doc/corral/docs/window-runs.png; do
  if ! grep -qx "$path" <<<"$contents"; then
    echo "check-deb: $deb lacks $path" >&2
    missing=1
  fi
done
[ "$missing" = 0 ]
dpkg-deb --field "$deb" Package Version Architecture Depends
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-depends --force-not-root --log=/dev/null -i "$deb" >/dev/null
"$root/usr/bin/corral" --version
"$root/usr/bin/corral-push" --version
zcat "$root/usr/share/man/man1/corral.1.gz" | grep -q '^\.TH corral' || { echo "check-deb: the man page is not a man page" >&2; exit 1; }
"$root/usr/bin/corral-tray" --version
echo "check-deb: $deb builds, lists what it must, and installs"
