#!/bin/sh
# Install cosched from this unpacked package (see INSTALL). Copies files only: it enables and starts nothing.
#
# Usage: ./install.sh [--prefix DIR] [--destdir DIR]
#   --prefix DIR   where cosched goes (default /usr/local): bin/, lib/, include/, share/
#   --destdir DIR  stage the files under DIR instead of / (for making a distribution package)
# The systemd units go to PREFIX/lib/systemd/system when PREFIX is /usr/local or /usr (systemd reads both),
# to /etc/systemd/system otherwise, with the binary's path in ExecStart set to PREFIX/bin/cosched.
set -eu

die() {
    echo "install.sh: $*" >&2
    exit 1
}
prefix=/usr/local
destdir=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || die "--prefix needs a folder"; prefix=$2; shift 2 ;;
        --destdir) [ $# -ge 2 ] || die "--destdir needs a folder"; destdir=$2; shift 2 ;;
        -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) die "unknown argument $1; see --help" ;;
    esac
done
case "$prefix" in /*) ;; *) die "--prefix $prefix: give an absolute path" ;; esac
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$here/bin/cosched" ] || die "$here/bin/cosched not found: run install.sh from the unpacked package"
if [ -z "$destdir" ] && [ "$(id -u)" != 0 ]; then
    die "run as root (or give --destdir to stage the files elsewhere)"
fi
# The binary must run here (a staged install may be for another machine).
if [ -z "$destdir" ] && ! said=$("$here/bin/cosched" --version 2>&1); then
    echo "$said" >&2
    die "cosched does not run on this system (it needs glibc $(sed -n 's/^Runs on x86_64 Linux with glibc \([0-9.]*\) .*/\1/p' \
        "$here/INSTALL") or later; here: $(ldd --version 2>/dev/null | head -n 1))"
fi
case "$prefix" in
    /usr/local | /usr) units=$prefix/lib/systemd/system ;;
    *) units=/etc/systemd/system ;;
esac
d=$destdir

install -d "$d$prefix/bin" "$d$prefix/lib/pkgconfig" "$d$prefix/include" "$d$prefix/share/man/man1" \
    "$d$prefix/share/doc/cosched" "$d$prefix/share/cosched/slurm" "$d$prefix/share/bash-completion/completions" \
    "$d$prefix/share/zsh/site-functions" "$d$prefix/share/fish/vendor_completions.d" "$d$units"
install -m 755 "$here/bin/cosched" "$d$prefix/bin/cosched"
install -m 644 "$here"/share/man/man1/*.1 "$d$prefix/share/man/man1/"
install -m 644 "$here"/share/doc/cosched/* "$d$prefix/share/doc/cosched/"
install -m 644 "$here"/share/cosched/slurm/* "$d$prefix/share/cosched/slurm/"
install -m 644 "$here/share/bash-completion/completions/cosched" "$d$prefix/share/bash-completion/completions/"
install -m 644 "$here/share/zsh/site-functions/_cosched" "$d$prefix/share/zsh/site-functions/"
install -m 644 "$here/share/fish/vendor_completions.d/cosched.fish" "$d$prefix/share/fish/vendor_completions.d/"

# The C client library: the shared library with its two links, the static one, the header, pkg-config's file.
install -m 644 "$here/include/cosched.h" "$d$prefix/include/"
install -m 644 "$here/lib/libcosched.a" "$d$prefix/lib/"
for so in "$here"/lib/libcosched.so.*.*; do
    install -m 755 "$so" "$d$prefix/lib/"
    ln -sf "$(basename "$so")" "$d$prefix/lib/libcosched.so.0"
done
ln -sf libcosched.so.0 "$d$prefix/lib/libcosched.so"
sed "s|^prefix=.*|prefix=$prefix|" "$here/lib/pkgconfig/cosched.pc" >"$d$prefix/lib/pkgconfig/cosched.pc"

for unit in "$here"/lib/systemd/system/*.service; do
    sed -e "s|/usr/local/bin/cosched|$prefix/bin/cosched|g" \
        -e "s|/usr/local/share/doc/cosched|$prefix/share/doc/cosched|g" "$unit" >"$d$units/$(basename "$unit")"
    chmod 644 "$d$units/$(basename "$unit")"
done

if [ -z "$destdir" ] && command -v ldconfig >/dev/null 2>&1; then
    ldconfig || echo "install.sh: ldconfig failed; run it before linking against libcosched.so" >&2
fi
echo "install.sh: installed cosched $("$d$prefix/bin/cosched" --version | cut -d' ' -f2) into $d$prefix," \
    "its units into $d$units"
echo "install.sh: next: set the controller's address (systemctl edit cosched-agent.service), then" \
    "systemctl daemon-reload && systemctl enable --now cosched-controller.service (or cosched-agent.service)"
