# shellcheck shell=bash
# need_packages WHY PACKAGE...: install the Debian packages not yet installed (sourced by scripts/setup and
# scripts/setup-package; $setup_name names the caller in its messages).
apt_updated=no
need_packages() {
    local why=$1 missing=() who=${setup_name:-setup}
    shift
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "$who: WARNING: ${missing[*]} missing and no root apt-get: $why will fail" >&2
        return 0
    fi
    echo "$who: installing ${missing[*]} ($why)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
        [ "$apt_updated" = yes ] && return 1
        apt-get update -qq >/dev/null
        apt_updated=yes
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}
