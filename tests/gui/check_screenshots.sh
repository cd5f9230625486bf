#!/usr/bin/env bash
# `tessera-gui --screenshot DIR` must exit 0 and write one PNG per view.
set -euo pipefail
gui=$1 dir=$2
rm -rf "$dir"
"$gui" --screenshot "$dir"
for view in plans memory mesh pipeline chunks memory-timeline compare measured; do
  file="$dir/$view.png"
  [ -s "$file" ] || { echo "missing $file"; exit 1; }
  # PNG signature: \x89PNG
  [ "$(head -c 4 "$file" | tail -c 3)" = "PNG" ] || { echo "$file is not a PNG"; exit 1; }
done
echo "a PNG per view in $dir"
