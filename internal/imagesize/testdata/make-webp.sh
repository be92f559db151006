#!/bin/sh
# Makes the WebP samples of imagesize's tests with libwebp's cwebp (Debian's webp package): a lossy file
# (a VP8 chunk), a lossless one (VP8L), and a lossy one with alpha (an extended file, VP8X), of sizes whose
# width and height differ and are not multiples of 16.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 1025x3 RGB and 37x23 RGBA, every pixel the same.
{ printf 'P6\n1025 3\n255\n'; head -c $((1025 * 3 * 3)) /dev/zero | tr '\0' '\100'; } >"$tmp/rgb.ppm"
{ printf 'P7\nWIDTH 37\nHEIGHT 23\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n'; head -c $((37 * 23 * 4)) /dev/zero | tr '\0' '\200'; } >"$tmp/rgba.pam"
cwebp -quiet "$tmp/rgb.ppm" -o lossy-1025x3.webp
cwebp -quiet -lossless "$tmp/rgb.ppm" -o lossless-1025x3.webp
cwebp -quiet "$tmp/rgba.pam" -o alpha-37x23.webp
