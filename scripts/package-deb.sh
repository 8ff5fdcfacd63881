#!/usr/bin/env bash
# Builds the Debian package: target/corral_<version>_<arch>.deb with both
# binaries (`corral`, `corral-push`, `corral-wake`, `corral-tray`, `corral-app`), the desktop entry, the icons at the
# usual sizes and the autostart entry (the tray starts at login; each user
# turns it off under Settings in the window).
#   ./scripts/package-deb.sh            # release build
#   ./scripts/package-deb.sh --debug    # the debug build (what the tests check)
# Install it with: sudo apt install ./target/corral_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
profile=release
[ "${1:-}" = --debug ] && profile=debug
if [ "$profile" = release ]; then
  cargo build --release -p corral -p corral-tray -p corral-app
else
  # As the app tests build it (scripts/test-app.sh): shared, not rebuilt.
  cargo build -p corral -p corral-tray -p corral-app --bins --tests
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
stage=target/deb/corral_${version}_${arch}
rm -rf "$stage"
install -Dm755 "target/$profile/corral" "$stage/usr/bin/corral"
install -Dm755 "target/$profile/corral-push" "$stage/usr/bin/corral-push"
install -Dm755 "target/$profile/corral-wake" "$stage/usr/bin/corral-wake"
install -Dm755 "target/$profile/corral-tray" "$stage/usr/bin/corral-tray"
install -Dm755 "target/$profile/corral-app" "$stage/usr/bin/corral-app"
install -Dm644 packaging/corral.desktop "$stage/usr/share/applications/corral.desktop"
install -Dm644 packaging/corral-autostart.desktop "$stage/etc/xdg/autostart/corral.desktop"
for size in 16 32 48 64 128 256; do
  install -Dm644 "icons/${size}x${size}.png" "$stage/usr/share/icons/hicolor/${size}x${size}/apps/corral.png"
done
install -Dm644 icons/icon.png "$stage/usr/share/icons/hicolor/512x512/apps/corral.png"
install -Dm644 README.md "$stage/usr/share/doc/corral/README.md"
# The manual beside it, its pictures with it.
for page in docs/*.md docs/*.png; do
  install -Dm644 "$page" "$stage/usr/share/doc/corral/docs/$(basename "$page")"
done
# Not enabled: `corral doctor` says when it helps and how to turn it on.
install -Dm644 packaging/apparmor/bwrap "$stage/usr/share/corral/apparmor/bwrap"
# The manual page and shell completions, generated from the command line's
# own definition by the binary just built.
corral="target/$profile/corral"
mkdir -p "$stage/usr/share/man/man1" "$stage/usr/share/bash-completion/completions" \
  "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
"$corral" man | gzip -9n > "$stage/usr/share/man/man1/corral.1.gz"
"$corral" completions bash > "$stage/usr/share/bash-completion/completions/corral"
"$corral" completions zsh > "$stage/usr/share/zsh/vendor-completions/_corral"
"$corral" completions fish > "$stage/usr/share/fish/vendor_completions.d/corral.fish"
size_kb=$(du -sk "$stage" | cut -f1)
mkdir -p "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: corral
Version: $version
Architecture: $arch
Maintainer: Corral developers <corral@localhost>
Installed-Size: $size_kb
Depends: libgtk-3-0, libwebkit2gtk-4.1-0, libayatana-appindicator3-1, git
Recommends: xdg-utils, openssh-client, bubblewrap
Section: devel
Priority: optional
Description: run coding agents in the background, supervised to a truthful end
 Corral launches coding agents (pi, Claude Code, Codex, Gemini CLI,
 opencode, or any command) in the background from markdown presets,
 supervises each run to a truthful end and keeps runs and transcripts in
 SQLite. A tray app, a command line (corral) and an MCP server.
CONTROL
# The debug package is only checked, never shipped: its 300 MB of
# unstripped programs are packed with the fastest compression (xz took
# 100 s of the test run), the release one with dpkg's default.
compression=()
[ "$profile" = debug ] && compression=(-Zgzip -z1)
dpkg-deb --root-owner-group "${compression[@]}" --build "$stage" "target/corral_${version}_${arch}.deb" >/dev/null
echo "target/corral_${version}_${arch}.deb"
