#!/usr/bin/env bash
# Refreshes the libraries the window uses from npm, pinned, into ui/vendor
# (committed: the window's files are embedded at build time, so a build
# needs no npm). Today: diff2html (MIT), which draws diffs as reviewers
# expect them — line numbers, changes within a line marked, side by side.
#   ./scripts/vendor-ui.sh
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.4.56
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "diff2html@$version" >/dev/null && tar xzf diff2html-*.tgz)
dest=ui/vendor/diff2html
mkdir -p "$dest"
cp "$work/package/bundles/js/diff2html.min.js" "$work/package/bundles/css/diff2html.min.css" "$work/package/LICENSE.md" "$dest/"
echo "diff2html $version from npm" > "$dest/VERSION"
