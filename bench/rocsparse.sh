# Sourced by the bench scripts: `rocsparse_path WORKDIR` prints the path of
# Debian's librocsparse.so.0.1 (1.31 GB, 111 bundles): $ROCSPARSE if set,
# else ../corpus/debian (built by shared/corpus/build-corpus.sh), the system
# copy, or one fetched with `apt-get download librocsparse0` into WORKDIR.
rocsparse_path() {
  local work=$1 cand
  if [ -n "${ROCSPARSE:-}" ]; then
    printf '%s\n' "$ROCSPARSE"
    return
  fi
  for cand in /work/corpus/debian/librocsparse.so.0.1 ../corpus/debian/librocsparse.so.0.1 \
              /usr/lib/x86_64-linux-gnu/librocsparse.so.0.1 "$work/deb/root/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"; do
    if [ -f "$cand" ]; then
      printf '%s\n' "$cand"
      return
    fi
  done
  echo "fetching librocsparse0 (apt-get download, 94 MB)" >&2
  mkdir -p "$work/deb"
  (cd "$work/deb" && apt-get download librocsparse0 >&2 && dpkg-deb -x librocsparse0_*.deb root)
  printf '%s\n' "$work/deb/root/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
}
